"""Classification's packing (``packing_kind``): images with a class each, from class folders, Parquet labels or the
``.cls`` members of adopted tars.

- ``convert images``: the class folders of an ImageNet-layout source (``image_tree``; their names, or a
  ``--classes`` file, are the classes), or Parquet's label column (``parquet_images``); each sample stores its
  label as a ``KEY.cls`` member, in its ``.json`` and in the table's ``label`` column.
- ``index``: each key's ``.cls`` member, an ASCII non-negative integer; the classes are a ``--classes`` file's,
  else ``"0"``..``"K-1"`` up to the largest label, and a label outside them is rejected.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dataio.formats.dataset.shard_members import CAPTION_MEMBER, LABEL_MEMBER, MAX_LABEL_BYTES
from dataio.formats.dataset.wds_shards import MemberLocation
from dataio.formats.errors import UsageError
from dataio.formats.images.class_names import label_outside, numbered_classes, read_class_names
from dataio.formats.images.detection_layouts import refuse_detection_layout
from dataio.formats.images.image_prepare import PreparedImage
from dataio.formats.images.image_tree import ImageTree, walk_image_tree
from dataio.formats.images.remote_image_tree import walk_remote_tree
from dataio.formats.images.source_reads import source_of
from dataio.formats.remote.source_files import RemoteRoot
from dataio.formats.images.packing_kind import NOTHING_BESIDE, Beside, Sample
from dataio.formats.images.parquet_images import ParquetFiles, ParquetImages, ParquetRow, scan_parquet_images

LABEL_NEEDED = f"a .{LABEL_MEMBER} member"


def label_member(handle, member: MemberLocation) -> int | None:
    """The ``.cls`` member's non-negative integer, or None; a member too long to be one is not read."""
    if member.size > MAX_LABEL_BYTES:
        return None
    try:
        text = os.pread(handle.fileno(), member.size, member.offset).decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    return int(text) if text.isdigit() and len(text) < 10 else None


class ClassPacking:
    """Images with classes."""

    name = "classification"
    what = "images"
    located: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    columns = ("label",)
    index_columns = ("label",)
    needed = LABEL_NEEDED
    named = "classes"

    def start(self, config: Any) -> None:
        return None

    # convert images

    def check(self, config: Any) -> None:
        if config.tokenizer is not None:
            raise ValueError("tokenizer is for image-text pairs: give captions=True (--captions) too")

    def folder(self, config: Any) -> ImageTree:
        root = source_of(config)
        if isinstance(root, RemoteRoot):  # the same walk's rules on one listing (detection layouts refused too)
            tree = walk_remote_tree(root, classes=True)
        else:
            refuse_detection_layout(root)  # its subfolders are no classes: refused, never packed as classes
            tree = walk_image_tree(root)
        if config.classes_file is None:
            return tree
        classes = list(read_class_names(config.classes_file))
        if len(classes) != len(tree.classes):
            raise UsageError(f"classes file {config.classes_file} names {len(classes)} classes, "
                             f"{config.src} has {len(tree.classes)} class folders")
        return ImageTree(classes, tree.files, tree.rejected)

    def parquet(self, files: ParquetFiles, config: Any) -> ParquetImages:
        return scan_parquet_images(files, image_column=config.image_column, label_column=config.label_column,
                                   classes_file=config.classes_file)

    def row_problem(self, row: ParquetRow, classes: list[str]) -> str | None:
        if row.label is None:
            return "no label in the row"
        if not 0 <= row.label < len(classes):
            return f"label {row.label} is not in 0..{len(classes) - 1}"
        return None

    def file_beside(self, config: Any, relative: str) -> Beside:
        return NOTHING_BESIDE

    def row_beside(self, config: Any, row: ParquetRow) -> Beside:
        return NOTHING_BESIDE

    def options(self, config: Any, parquet: bool) -> dict[str, Any]:
        return {}

    def sample(self, path: str, label: int, prepared: PreparedImage) -> Sample:
        meta = {"path": path, "label": label, "width": prepared.width, "height": prepared.height}
        return Sample({LABEL_MEMBER: str(label)}, meta)

    def finish(self, columns: dict[str, Any], options: dict[str, Any], tokenizer: Any, out: Path) -> None:
        return None

    # index

    def check_index(self, config: Any) -> None:
        if config.tokenizer is not None:
            raise ValueError("tokenizer is for image-text pairs (captions), not classes")

    def claims(self, extensions: set[str]) -> bool:
        """Classes, unless no key has a ``.cls`` and some have a ``.txt`` (image-text pairs)."""
        return LABEL_MEMBER in extensions or CAPTION_MEMBER not in extensions

    def stamp(self, config: Any) -> list:
        return []

    def read(self, handle: Any, members: dict[str, Any], where: str, config: Any
             ) -> tuple[Any, str | None, list[dict[str, str]]]:
        if LABEL_MEMBER not in members:
            return None, f"lacks {LABEL_NEEDED}", []
        label = label_member(handle, members[LABEL_MEMBER])
        return label, None if label is not None else ".cls is not a non-negative integer", []

    def classes(self, config: Any, values: list[Any]) -> tuple[str, ...]:
        return numbered_classes(values) if config.classes_file is None else read_class_names(config.classes_file)

    def outside(self, value: Any, classes: tuple[str, ...], config: Any) -> str | None:
        return label_outside(value, classes, named=config.classes_file is not None)

    def values(self, value: Any) -> tuple:
        return (value,)

    def index_options(self, paths: list[str]) -> dict[str, Any]:
        return {}


CLASS_PACKING = ClassPacking()
