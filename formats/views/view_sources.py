"""The sources of ``dataio convert images --kind views``: every image of a folder, or the image column of Parquet.

- **A folder**, flat or nested to any depth: folders are not classes here (a self-supervised set has none), so
  the tree is walked from the top as a caption folder is (``image_tree``'s walk: symlink loops, FIFOs,
  unreadable folders and files, names that are not UTF-8, hidden files, the same rejections), and every image
  under it is a sample, each folder's files before its subfolders, sorted by their bytes.
- **Hugging Face Parquet**: the image column alone; the rows are counted from the footers (no column is read to
  list them) and the images streamed in row order (``parquet_images``), a damaged file one rejected row.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


from dataio.formats.errors import UsageError
from dataio.formats.images.image_tree import ImageTree, _Walk, errno_text
from dataio.formats.images.remote_image_tree import walk_remote_tree
from dataio.formats.remote.source_files import RemoteRoot
from dataio.formats.images.parquet_images import (DAMAGED_PARQUET, ParquetFiles, ParquetImages, _common_root, _name,
                                                  check_image_column, open_parquet_input)

NO_LABEL = -1  # an input's label: views have no classes


def walk_view_folder(src: str | Path | RemoteRoot) -> ImageTree:
    """The images under ``src`` (label ``NO_LABEL``, no classes) and what the walk rejected; a ``RemoteRoot``
    by the same rules, on its listing (``remote_image_tree``)."""
    if isinstance(src, RemoteRoot):
        return walk_remote_tree(src, classes=False)
    root = os.fsencode(src)
    try:
        info = os.stat(root)
    except OSError as e:
        raise UsageError(f"source folder {src} does not exist or is not a folder ({errno_text(e)})") from None
    if not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"source folder {src} does not exist or is not a folder")
    walk = _Walk(root)
    walk.walk_class(b"", NO_LABEL, (info.st_dev, info.st_ino))
    if not walk.files and not walk.rejected:
        raise UsageError(f"source folder {src} holds no images")
    return ImageTree([], walk.files, sorted(walk.rejected))


def scan_parquet_views(files: ParquetFiles, *, image_column: str) -> ParquetImages:
    """List a Parquet views source: one input per row (counted from each file's footer), no classes."""
    src = _common_root(files)
    rows: list[tuple[str, int]] = []
    for file in files:
        try:
            reader = open_parquet_input(file)  # a local file through the gate, a URL's object by ranges
            schema = reader.schema_arrow
        except DAMAGED_PARQUET:  # a damaged footer: the file is one rejected row, the rest go on
            rows.append((_name(src, file), NO_LABEL))
            continue
        if image_column not in schema.names:
            raise UsageError(f"{file}: no column {image_column!r} (columns: {', '.join(schema.names)}); name the "
                             "image column (--image-column)")
        check_image_column(file, schema, image_column)
        name = _name(src, file)
        rows += [(f"{name}#{row}", NO_LABEL) for row in range(reader.metadata.num_rows)]
    return ParquetImages(src, tuple(files), image_column, "", (), tuple(rows))
