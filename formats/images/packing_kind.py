"""What a kind of sample packs beside its images: the small object ``convert images`` and ``index`` ask.

The two packers of image folders are one engine each, whatever the kind (``image_convert``: the walk or Parquet
scan, the prepare jobs in worker processes, the journalled shards, the table, ``rejected.jsonl``, the manifest
last; ``wds_index``: the tars' scan and journal, the DALI indexes, the table, the manifest). What differs by kind
is answered by the kind's packing, named in the table of kinds (``dataio.formats.kinds``, the ``packing`` part) and
found there by name, so the engines import no kind's room:

- **its inputs**: which files of a folder (or rows of Parquet) are samples, their classes, and what is checked
  of a row before its image is read (``ConvertKind.folder``, ``parquet``, ``row_problem``);
- **what each input reads beside its image**: a picklable ``Beside`` sent with the image's job and read in the
  worker process that prepares it (a pair's caption), its value then the sample's;
- **what a sample stores**: its tar members beside the image, its ``.json`` metadata, its table columns, and
  which of its members the table locates (``sample``, ``located``, ``columns``);
- **its manifest**: the options it adds, its classes, and last its columns computed over every sample (the
  captions' token ids) (``options``, ``finish``); the declared fields are then the kind's ``fields`` part of the
  same table, read off those options;
- for ``dataio index``, the members a key needs beside its image and how they read (``IndexKind``).

Classification's packing lies in ``formats/images/class_packing.py``, the pairs' in ``formats/pairs``, the views'
in ``formats/views``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dataio.formats.images.image_prepare import PreparedImage, Rejection
from dataio.formats.images.image_tree import ImageTree
from dataio.formats.images.parquet_images import ParquetFiles, ParquetImages, ParquetRow
from dataio.formats.kinds import kind_named


class Beside(Protocol):
    """What one input reads beside its image, in the worker that prepares the image (picklable)."""

    def read(self, src: str | None) -> Any:
        """The value (the sample's, stored with its image), or a ``Rejection`` of the input. ``src``: the source
        folder of a file input (None for a Parquet row)."""


@dataclass(frozen=True)
class NothingBeside:
    """An input that reads nothing beside its image."""

    def read(self, src: str | None) -> None:
        return None


NOTHING_BESIDE = NothingBeside()


@dataclass(frozen=True)
class Sample:
    """What one prepared input stores: its tar members beside the image (``name -> text``), its ``.json``
    metadata, and what its row holds after the engine's (``ConvertKind.extra``: a pair's caption)."""

    members: dict[str, str]
    meta: dict[str, Any]
    extra: tuple = ()


class PackingKind(Protocol):
    """What both packers ask of a kind."""

    name: str  # the manifest's sample_kind
    what: str  # its samples in a summary line: "images", "image-text pairs"

    def start(self, config: Any) -> None:
        """What is checked before anything is read or written (a tokenizer file, loaded once)."""

    def finish(self, columns: dict[str, Any], options: dict[str, Any], tokenizer: Any, out: Path
               ) -> dict[int, str] | None:
        """Columns computed over every sample (and the options recording them), added in place last; the rows it
        could not compute (a user's tokenizer failing on a caption), each with why, for the packer to reject
        (those rows are left out of the columns it added)."""


class ConvertKind(PackingKind, Protocol):
    """A kind ``dataio convert images`` packs."""

    located: tuple[str, ...]  # members beside the image whose place in the shard the table records
    extra: tuple[str, ...]  # the names of ``Sample.extra``, after the row's path, label, size and checksum
    columns: tuple[str, ...]  # the row's columns the table holds besides path, size and checksum ("label")

    def check(self, config: Any) -> None:
        """ValueError naming an option of ``config`` (a ``ConvertImagesConfig``) the kind does not take."""

    def folder(self, config: Any) -> ImageTree:
        """The inputs of a source folder: classes, ``(path, label)`` of each file to pack, the rejected."""

    def parquet(self, files: ParquetFiles, config: Any) -> ParquetImages:
        """The inputs of Parquet files: classes and ``(FILE#ROW, label)`` of each row, listed without images."""

    def row_problem(self, row: ParquetRow, classes: list[str]) -> str | None:
        """Why a Parquet row is rejected before its image is prepared, or None."""

    def file_beside(self, config: Any, relative: str) -> Beside:
        """What the file ``relative`` (escaped, under ``config.src``) reads beside its image."""

    def row_beside(self, config: Any, row: ParquetRow) -> Beside:
        """What a Parquet row reads beside its image."""

    def options(self, config: Any, parquet: bool) -> dict[str, Any]:
        """The manifest options the kind adds (and the journal's identity with them)."""

    def sample(self, path: str, label: int, prepared: PreparedImage) -> Sample:
        """What an input stores, from its stored path, its label (the walk's or row's) and its prepared image."""


class IndexKind(PackingKind, Protocol):
    """A kind ``dataio index`` adopts tars of."""

    needed: str  # what a key needs beside its image, for messages ("a .cls member")
    named: str  # the kind for messages ("classes")
    index_columns: tuple[str, ...]  # the table columns of ``values``

    def check_index(self, config: Any) -> None:
        """ValueError naming an option of ``config`` (an ``IndexConfig``) the kind does not take."""

    def claims(self, extensions: set[str]) -> bool:
        """Whether tars holding members of these extensions hold this kind (``index`` without a kind said)."""

    def stamp(self, config: Any) -> list:
        """What of ``config`` changes how a tar reads (its journal is kept only while the same)."""

    def read(self, handle: Any, members: dict[str, Any], where: str, config: Any
             ) -> tuple[Any, str | None, list[dict[str, str]]]:
        """``(value, None, notes)`` from a key's members beside its image (``members``: extension ->
        ``MemberLocation``; ``handle``: the open tar), or ``(None, reason, notes)``; ``notes``: what is listed
        in ``rejected.jsonl`` though the key is kept. The value is JSON (the journal holds it)."""

    def classes(self, config: Any, values: list[Any]) -> tuple[str, ...]:
        """The folder's classes, from every key's value."""

    def outside(self, value: Any, classes: tuple[str, ...], config: Any) -> str | None:
        """Why a key's value is not one of the classes, or None."""

    def values(self, value: Any) -> tuple:
        """A key's values of ``index_columns``."""

    def index_options(self, paths: list[str]) -> dict[str, Any]:
        """The manifest options the kind adds, from the adopted images' member paths."""


def asked_kind(kind: str, captions: bool | None) -> str:
    """The kind a packing is asked for: ``kind``, or the one the ``captions`` flag names (True: image-text pairs,
    False: classes); "" when neither says (``dataio index`` then tells it from the tars' members)."""
    if captions and kind not in ("", "pairs"):
        raise ValueError(f"captions=True (--captions) packs image-text pairs, not {kind!r}: give one of captions and "
                         "kind (--kind)")
    if captions:
        return "pairs"
    return kind or ("classification" if captions is False else "")


def packing_of(name: str) -> Any:
    """The packing of kind ``name`` (a ``ConvertKind``, and for the kinds ``index`` adopts an ``IndexKind``);
    a ValueError naming the command that packs a kind these packers do not."""
    kind = kind_named(name)
    packing = kind.part("packing")
    if packing is None:
        raise ValueError(f"{kind.what} ({name!r}) are packed by `{kind.pack}`")
    return packing


def convert_kind(name: str) -> ConvertKind:
    return packing_of(name)


def index_kind(name: str) -> IndexKind:
    return packing_of(name)


def check_index_options(config: Any) -> None:
    """ValueError naming an option of an ``IndexConfig`` that its asked kind does not take (none is refused while
    the kind is to be read off the tars: a classification folder then leaves a tokenizer unused)."""
    if config.kind:
        index_kind(config.kind).check_index(config)
