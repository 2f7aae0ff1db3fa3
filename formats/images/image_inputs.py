"""What a ``convert images`` conversion packs: its inputs as its kind lists them, and each one's size.

A folder (local, or a URL's listing: ``remote_image_tree``) or Parquet files; the sizes are what a split
conversion (the ranks, a plan's items) balances by bytes, from one listing for a URL, not a request per object.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dataio.formats.images.packing_kind import ConvertKind, convert_kind
from dataio.formats.images.parquet_images import ParquetImages, parquet_files
from dataio.formats.images.remote_image_tree import remote_sizes
from dataio.formats.images.remote_parquet import remote_parquet_files
from dataio.formats.images.skipped_folders import refuse_output_inside_source
from dataio.formats.images.source_reads import source_file_size, source_of
from dataio.formats.remote.source_files import RemoteRoot


@dataclass(frozen=True)
class ImageInputs:
    """What one conversion packs: ``(id, label)`` per input (a relative path, or ``FILE#ROW`` of a Parquet
    source) and where the bytes come from."""

    classes: list[str]
    files: list[tuple[str, int]]
    rejected: list[tuple[str, str]]  # found before reading (by the walk)
    parquet: ParquetImages | None = None
    first: int = 0  # the Parquet source's row of files[0]

    def part(self, start: int, stop: int, with_rejected: bool) -> "ImageInputs":
        return replace(self, files=self.files[start:stop], rejected=self.rejected if with_rejected else [],
                       first=self.first + start)


def list_inputs(config: Any, kind: ConvertKind, sized: bool) -> tuple[ImageInputs, np.ndarray | None]:
    """The conversion's inputs, as its kind lists them, and (``sized``: for a split conversion) each input's size."""
    root = source_of(config)
    files = remote_parquet_files(root) if isinstance(root, RemoteRoot) else parquet_files(root)
    if files is not None:
        source = kind.parquet(files, config)
        inputs = ImageInputs(list(source.classes), list(source.rows), [], source)
        return inputs, source.row_sizes() if sized else None
    if not isinstance(root, RemoteRoot):  # an output inside a bucket's prefix is a different store: none to refuse
        refuse_output_inside_source(root, config.out)
    tree = kind.folder(config)
    inputs = ImageInputs(list(tree.classes), tree.files, tree.rejected)
    if not sized:
        return inputs, None
    if isinstance(root, RemoteRoot):  # sizes from one listing, not a request per object
        return inputs, remote_sizes(root, tree.files)
    return inputs, np.array([source_file_size(root, relative) for relative, _ in tree.files], dtype=np.int64)


def image_listing(config: Any) -> tuple[ImageInputs, np.ndarray]:
    """What a plan cuts into items (``formats/plan``): the inputs as the kind lists them, and each one's bytes."""
    kind = convert_kind(config.kind)
    kind.start(config)
    inputs, sizes = list_inputs(config, kind, sized=True)
    return inputs, np.asarray(sizes, dtype=np.int64)
