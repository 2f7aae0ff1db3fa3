"""The pairs' packing (``dataio.formats.images.packing_kind``): images each with its caption, no classes.

- ``convert images --captions``: a caption folder's images, each read with its ``NAME.txt`` sidecar, or Parquet
  rows with a caption column (``caption_sources``); the caption is read and checked in the worker that prepares
  its image. Each sample stores ``KEY.txt`` (the caption) and ``KEY.json`` (path and size) beside its image, the
  table its caption and where its ``.json`` lies (``pair_fields``).
- ``index`` of img2dataset tars: each key's ``.txt`` caption and ``.json`` metadata (``caption_index``); the
  images keep their encoding, which the manifest records.
- both: with a tokenizer, each caption's token ids are stored too, computed once over every caption at the end
  (``caption_tokens``), and the manifest records the tokenizer and the ids' dtype.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dataio.formats.dataset.sample_fields import member_columns
from dataio.formats.dataset.shard_members import CAPTION_MEMBER, LABEL_MEMBER
from dataio.formats.images.image_prepare import PreparedImage
from dataio.formats.images.image_tree import ImageTree
from dataio.formats.images.packing_kind import Sample
from dataio.formats.images.parquet_images import ParquetFiles, ParquetImages, ParquetRow
from dataio.formats.pairs.caption_index import CAPTION_NEEDED, pair_text
from dataio.formats.images.source_reads import source_of
from dataio.formats.pairs.caption_sources import CaptionInput, scan_parquet_pairs, sidecar_of, walk_caption_folder
from dataio.formats.pairs.caption_tokens import caption_ids, checked_tokenizer, token_dtype_name
from dataio.formats.pairs.pair_fields import CAPTION, META, TOKENS


def image_encoding(paths: list[str]) -> str:
    """The images' encoding as the image field declares it, from their member names: ``jpeg``, ``png``, ``webp``,
    or ``mixed``."""
    kinds = {path.rsplit(".", 1)[-1].lower().replace("jpg", "jpeg") for path in paths}
    return kinds.pop() if len(kinds) == 1 else "mixed"


class PairPacking:
    """Image-text pairs."""

    name = "pairs"
    what = "image-text pairs"
    located = (META.name,)
    extra = (CAPTION.name,)
    columns = (CAPTION.name,)
    index_columns = (CAPTION.name, *member_columns(META.name))
    needed = CAPTION_NEEDED
    named = "image-text pairs"

    def start(self, config: Any) -> None:
        checked_tokenizer(config.tokenizer)  # a bad tokenizer file is named before anything is read or written

    def finish(self, columns: dict[str, Any], options: dict[str, Any], tokenizer: Any, out: Path
               ) -> dict[int, str] | None:
        """Each caption's token ids, with a tokenizer (given, or trained on the captions): the ``input_ids``
        column (of the captions it encoded), the tokenizer's record and the ids' dtype; the rows whose caption
        the tokenizer failed on, with why."""
        if tokenizer is None:
            return None
        column, record, failed = caption_ids(columns[CAPTION.name], tokenizer, out)
        if column is not None:
            columns[TOKENS], options["tokenizer"] = column, record
            options["token_dtype"] = token_dtype_name(record)
        return failed

    # convert images

    def check(self, config: Any) -> None:
        if config.classes_file is not None:
            raise ValueError("classes_file is for classes; image-text pairs have captions instead")
        if config.format != "wds":
            raise ValueError("image-text pairs are packed as WebDataset tars (format 'wds')")
        if config.tokenizer is not None and config.tokenizer.train and config.world_size > 1:
            raise ValueError("a tokenizer trained by each rank would differ: give every rank one tokenizer file "
                             "(--tokenizer FILE)")

    def folder(self, config: Any) -> ImageTree:
        return walk_caption_folder(source_of(config))

    def parquet(self, files: ParquetFiles, config: Any) -> ParquetImages:
        return scan_parquet_pairs(files, image_column=config.image_column, caption_column=config.caption_column,
                                  max_caption_bytes=config.max_caption_bytes)

    def row_problem(self, row: ParquetRow, classes: list[str]) -> str | None:
        return None  # no label: the caption is checked with the image

    def file_beside(self, config: Any, relative: str) -> CaptionInput:
        return CaptionInput(sidecar=sidecar_of(relative), limit=config.max_caption_bytes)

    def row_beside(self, config: Any, row: ParquetRow) -> CaptionInput:
        return CaptionInput(value=row.value, limit=config.max_caption_bytes)

    def options(self, config: Any, parquet: bool) -> dict[str, Any]:
        return {"captions": config.caption_column if parquet else "sidecar",
                "max_caption_bytes": config.max_caption_bytes}

    def sample(self, path: str, label: int, prepared: PreparedImage) -> Sample:
        caption = prepared.beside
        return Sample({CAPTION_MEMBER: caption}, {"path": path, "width": prepared.width, "height": prepared.height},
                      (caption,))

    # index

    def check_index(self, config: Any) -> None:
        return None

    def claims(self, extensions: set[str]) -> bool:
        """Pairs, when no key has a ``.cls`` member and some have a ``.txt``."""
        return LABEL_MEMBER not in extensions and CAPTION_MEMBER in extensions

    def stamp(self, config: Any) -> list:
        return [config.max_caption_bytes]

    def read(self, handle: Any, members: dict[str, Any], where: str, config: Any
             ) -> tuple[Any, str | None, list[dict[str, str]]]:
        return pair_text(handle, members, where, config.max_caption_bytes)

    def classes(self, config: Any, values: list[Any]) -> tuple[str, ...]:
        return ()

    def outside(self, value: Any, classes: tuple[str, ...], config: Any) -> str | None:
        return None

    def values(self, value: Any) -> tuple:
        return tuple(value)  # [caption, json_offset, json_size]

    def index_options(self, paths: list[str]) -> dict[str, Any]:
        return {"image_encoding": image_encoding(paths)}


PAIR_PACKING = PairPacking()
