"""The sources of ``dataio convert images --captions``: a folder of images with sidecar captions, or Hub Parquet
files with an image column and a caption column.

- **A caption folder** (a fine-tuning set: ``NAME.jpg`` beside ``NAME.txt``, in any subfolders) is walked as
  a class folder is (``image_tree``'s walk: symlink loops, FIFOs, unreadable folders and files, names
  that are not UTF-8, hidden files, the same rejections), from the top: every image is a sample. Its
  caption is the file of the same name with the extension ``.txt``, read by the worker that prepares the
  image (``read_caption``); an image without one is rejected, and so is a ``.txt`` without an image
  (listed: a caption nobody reads is a sign the folder is not what it seems), and so is a second picture of one
  name (``NAME.jpg`` and ``NAME.png``: the first in sorted order is packed with ``NAME.txt``).
- **Hub Parquet** (``datasets``' ``Image`` struct or plain bytes, and a string column): only the caption
  column is read to list the rows (``parquet_images``' projection); image bytes and captions are then
  streamed in row order, the caption handed to the worker with the bytes, as bytes (a caption that is not
  UTF-8 is its own row's rejection, not its row group's). A row group whose caption column is larger, by its
  footer, than its rows' captions of at most ``--max-caption-bytes`` can be has its captions read page by page
  (``parquet_values``): a longer caption is never held, only its size (``TooLong``).

A caption is checked where its image is prepared (``pair_fields.caption_text``: UTF-8, printable text, no NUL, at
most ``limit`` bytes, never read past it), so a rejected pair is one line in ``rejected.jsonl`` naming the
file or ``FILE#ROW``, as a rejected image is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from dataio.formats.file_gate import FileTooLarge, LinkLeavesTree
from dataio.formats.pairs.pair_fields import MAX_CAPTION_BYTES, NO_LABEL, caption_text, caption_too_long
from dataio.formats.errors import UsageError
from dataio.formats.parquet_values import TooLong, UnreadValue
from dataio.formats.images.image_prepare import Rejection
from dataio.formats.images.image_tree import ImageTree, NotRegularFile, _Walk, errno_text, escape_path, unescape_path
from dataio.formats.images.remote_image_tree import RemoteWalk, caption_walk
from dataio.formats.images.source_reads import SourceFolder, read_source_file, source_file_size
from dataio.formats.remote.source_files import RemoteRoot, SourceUnreadable
from dataio.formats.images.parquet_images import ParquetFiles, ParquetImages, _common_root, _name, open_parquet_source

CAPTION_SUFFIX = b".txt"


@dataclass(frozen=True)
class CaptionInput:
    """Where a pair's caption comes from: a folder image's sidecar (its escaped path under ``src``) or a Parquet
    row's value; ``limit``: the most bytes packed."""

    sidecar: str | None = None
    value: Any = None
    limit: int = MAX_CAPTION_BYTES

    def read(self, src: SourceFolder | None) -> str | Rejection:
        """The caption, read in the worker that prepares its image (``packing_kind.Beside``), or why the pair is
        rejected."""
        text = read_caption(src, self)
        return Rejection(text[0]) if isinstance(text, tuple) else text


def sidecar_of(relative: str) -> str:
    """``a/NAME.jpg`` -> ``a/NAME.txt`` (escaped paths, as ``image_tree`` stores them)."""
    raw = unescape_path(relative)
    return escape_path(os.path.splitext(raw)[0] + CAPTION_SUFFIX)


def read_caption(src: SourceFolder | None, caption: CaptionInput) -> str | tuple[str]:
    """The caption text, or ``(reason,)`` when the pair is not to be packed."""
    if caption.sidecar is None:
        value = caption.value
        if value is None:
            return ("no caption in the row",)
        if isinstance(value, TooLong):  # never read whole (parquet_values)
            return (caption_too_long(value.size, caption.limit),)
        if isinstance(value, UnreadValue):
            return (value.reason,)
        if not isinstance(value, (str, bytes)):
            return (f"caption is a {type(value).__name__}, not text",)
        data = value
    else:
        assert src is not None
        name = caption.sidecar.rsplit('/', 1)[-1]
        try:  # regular files only: a FIFO named NAME.txt would block the open for ever, /dev/zero read on
            data = read_source_file(src, caption.sidecar, caption.limit, inside=True)
        except (NotRegularFile, LinkLeavesTree) as e:  # a link out of SRC: a credentials file is never packed
            return (f"its caption {name} is {e}",)
        except FileTooLarge:
            size = source_file_size(src, caption.sidecar)
            return (caption_too_long(max(size, caption.limit + 1), caption.limit),)  # a size below: it grew
        except FileNotFoundError:
            return (f"no caption file {name} beside it",)
        except OSError as e:
            return (f"cannot read its caption {caption.sidecar}: {errno_text(e)}",)
        except SourceUnreadable as e:  # a remote caption's storage failed past its retries
            return (f"cannot read its caption {caption.sidecar}: {e}",)
    text, problem = caption_text(data, caption.limit)
    return (problem,) if text is None else text


class _CaptionWalk(_Walk):
    """The class walk, from the top, noting the ``.txt`` files it passes (every other file as before)."""

    def __init__(self, src: bytes) -> None:
        super().__init__(src)
        self.captions: set[bytes] = set()

    def _not_packed(self, entry: os.DirEntry, path: bytes) -> None:
        if entry.name.lower().endswith(CAPTION_SUFFIX):
            self.captions.add(path)
        else:
            super()._not_packed(entry, path)


def walk_caption_folder(src: str | Path | RemoteRoot) -> ImageTree:
    """The images of a caption folder (label ``NO_LABEL``), and what was rejected: the walk's, and every
    caption file without an image; a ``RemoteRoot`` by the same rules, on its listing (``remote_image_tree``)."""
    walk = caption_walk(src, NO_LABEL) if isinstance(src, RemoteRoot) else _local_caption_walk(src)
    walk.files = _one_picture_per_name(walk)
    images = {os.path.splitext(unescape_path(path))[0] for path, _ in walk.files}
    for caption in sorted(walk.captions):
        if os.path.splitext(caption)[0] not in images:
            walk.reject(caption, "caption without an image (no NAME.jpg, .jpeg, .png or .webp beside it): not packed")
    if not walk.files and not walk.rejected:
        raise UsageError(f"source folder {src} holds no images (a caption folder holds NAME.jpg beside NAME.txt)")
    return ImageTree([], walk.files, sorted(walk.rejected))


def _local_caption_walk(src: str | Path) -> _CaptionWalk:
    root = os.fsencode(src)
    try:
        info = os.stat(root)
    except OSError:
        raise UsageError(f"source folder {src} does not exist or is not a folder") from None
    if not os.path.isdir(root):
        raise UsageError(f"source folder {src} does not exist or is not a folder")
    walk = _CaptionWalk(root)
    walk.walk_class(b"", NO_LABEL, (info.st_dev, info.st_ino))
    return walk


def _one_picture_per_name(walk: _CaptionWalk | RemoteWalk) -> list[tuple[str, int]]:
    """The walk's images less a name's second picture (``NAME.jpg`` and ``NAME.png`` share one ``NAME.txt``: a
    caption describes one picture), each left out with its line; the first in the walk's sorted order is packed."""
    kept: dict[bytes, bytes] = {}
    files = []
    for path, label in walk.files:
        raw = unescape_path(path)
        stem = os.path.splitext(raw)[0]
        if stem in kept:
            first, name = escape_path(os.path.basename(kept[stem])), escape_path(os.path.basename(stem))
            walk.reject(raw, f"a second picture of the name {name} ({first} is packed with its caption): not packed")
        else:
            kept[stem] = raw
            files.append((path, label))
    return files


def scan_parquet_pairs(files: ParquetFiles, *, image_column: str, caption_column: str,
                       max_caption_bytes: int = MAX_CAPTION_BYTES) -> ParquetImages:
    """List a Parquet pair source: its rows (only the caption column's row counts are read), no classes; captions
    are streamed as bytes, a row group whose caption chunk is over what ``max_caption_bytes`` allows page by page
    (``parquet_values``)."""
    src = _common_root(files)
    rows: list[tuple[str, int]] = []
    for file in files:
        reader = open_parquet_source(file, image_column, caption_column,
                                     "caption columns (--image-column, --caption-column)")
        if reader is None:  # a damaged footer: the file is one rejected row, the rest go on
            rows.append((_name(src, file), NO_LABEL))
            continue
        kind = reader.schema_arrow.field(caption_column).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
                or pa.types.is_large_binary(kind)):
            raise UsageError(f"{file}: column {caption_column!r} is {kind}, not captions (strings)")
        name = _name(src, file)
        rows += [(f"{name}#{row}", NO_LABEL) for row in range(reader.metadata.num_rows)]
    return ParquetImages(src, tuple(files), image_column, caption_column, (), tuple(rows),
                         value_limit=max_caption_bytes)
