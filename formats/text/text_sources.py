"""Documents from .txt, .jsonl and .parquet files, with bad input counted, not fatal.

``iter_documents`` yields ``Document(source, index, text)`` in file order, from whole files or from
``TextPiece``s: byte ranges of a .txt/.jsonl file cut at document boundaries, or row-group ranges of
a .parquet file (``text_pieces`` cuts them, so that the ranks of a multi-node conversion can share
one large file). Empty documents and undecodable ones (bad UTF-8, bad JSON, a missing or non-string
field, a lone surrogate such as the JSON escape ``"\\ud800"``) are tallied in ``SourceStats`` with a
few examples each (``FILE:LINE``, the line counted from the file's start whatever the piece), so
the converter can report them.
"""

from __future__ import annotations

from itertools import pairwise

import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pyarrow.parquet as pq

from dataio.formats.errors import UsageError
from dataio.formats.remote.source_files import RemoteRoot, open_parquet_source as open_parquet, open_source
from dataio.formats.remote.source_files import remote_files
from dataio.formats.limits import REPORT_EXAMPLES

SUFFIXES = {".txt": "txt", ".text": "txt", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet"}
_SCAN = 1 << 16  # bytes read at a time looking for a document boundary or counting lines
BLOCKS_PER_RANK = 16  # .txt/.jsonl files are cut into about this many pieces per rank: loads within ~6%
_WHITESPACE = b" \t\n\r\x0b\x0c"  # what bytes.strip() strips: a line of only these is blank


def _at_start() -> int:
    return 0


@dataclass(frozen=True)
class Document:
    source: str
    index: int  # line (txt/jsonl, 1-based, counted from its piece's start) or row (parquet, 0-based) where it starts
    text: str
    lines_before: Callable[[], int] = _at_start  # lines of the file before its piece, counted when asked

    @property
    def number(self) -> int:
        """Line (txt/jsonl, 1-based) or row (parquet, 0-based) of the file where the document starts."""
        return self.lines_before() + self.index


@dataclass(frozen=True)
class TextPiece:
    """Part of a source file: bytes ``[start, stop)`` of a .txt/.jsonl file, both document boundaries, or
    row groups ``[start, stop)`` of a .parquet file; ``stop`` None: to the end."""

    path: Path
    start: int = 0
    stop: int | None = None

    def key(self) -> tuple:
        """What a journal's fingerprint holds of it: the whole file as before, a part with its bounds."""
        whole = (str(self.path.resolve()), self.path.stat().st_size)
        return whole if self.start == 0 and self.stop is None else (*whole, self.start, self.stop)


@dataclass
class SourceStats:
    """What was read: documents kept, and each kind of skipped input with examples."""

    documents: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def skip(self, kind: str, where: str | Callable[[], str]) -> None:
        """Count one; keep ``where`` as an example (called only then: it may count a file's lines)."""
        self.skipped[kind] = self.skipped.get(kind, 0) + 1
        examples = self.examples.setdefault(kind, [])
        if len(examples) < REPORT_EXAMPLES:
            examples.append(where if isinstance(where, str) else where())


def source_kind(path: Path) -> str:
    """'txt', 'jsonl' or 'parquet' from the suffix; UsageError otherwise."""
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise UsageError(f"{path}: unsupported source type {path.suffix!r} (use .txt, .jsonl or .parquet)")
    return kind


def expand_sources(paths: list[Path]) -> list[Path]:
    """Files given, plus supported files inside given folders (sorted); UsageError if none."""
    files: list[Path] = []
    for path in paths:
        if isinstance(path, RemoteRoot):  # a URL: the object, or the objects under it (or its glob)
            found = remote_files(path, SUFFIXES)
            for file in found:
                source_kind(file)
            files += found
        elif path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        elif path.is_file():
            source_kind(path)
            files.append(path)
        else:
            raise UsageError(f"{path} does not exist")
    if not files:
        raise UsageError(f"no .txt, .jsonl or .parquet files in {', '.join(map(str, paths))}")
    return files


def _decode(raw: bytes, where: Callable[[], str], stats: SourceStats) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        stats.skip("bad_utf8", where)
        return None


class _LinesBefore:
    """The lines of a file before byte ``offset``, counted when first asked: only an example of bad input
    in a piece that does not start the file needs them (a read of the file up to there, at disk speed)."""

    def __init__(self, path: Path, offset: int) -> None:
        self.path, self.offset = path, offset
        self.count: int | None = 0 if offset == 0 else None

    def __call__(self) -> int:
        if self.count is None:
            count, left = 0, self.offset
            with open_source(self.path) as f:
                while left > 0 and (block := f.read(min(_SCAN, left))):
                    count += block.count(b"\n")
                    left -= len(block)
            self.count = count
        return self.count


def _lines(path: Path, piece: TextPiece) -> Iterator[bytes]:
    """The raw lines (with their newline) of a .txt/.jsonl piece."""
    with open_source(path) as f:
        f.seek(piece.start)
        position = piece.start
        for raw in f:
            if piece.stop is not None and position >= piece.stop:
                return
            position += len(raw)
            yield raw


def _txt(piece: TextPiece, doc_sep: str, stats: SourceStats) -> Iterator[Document]:
    path, before = piece.path, _LinesBefore(piece.path, piece.start)
    source = str(path)
    if doc_sep == "line":
        for number, raw in enumerate(_lines(path, piece), 1):
            text = _decode(raw.rstrip(b"\r\n"), lambda: f"{path}:{before() + number}", stats)
            if text is not None:
                yield Document(source, number, text, before)
        return
    lines: list[bytes] = []
    start = 1
    for number, raw in enumerate(_lines(path, piece), 1):
        if raw.strip():
            if not lines:
                start = number
            lines.append(raw)
        elif lines:
            text = _decode(b"".join(lines).rstrip(b"\r\n"), lambda: f"{path}:{before() + start}", stats)
            if text is not None:
                yield Document(source, start, text, before)
            lines = []
    if lines:
        text = _decode(b"".join(lines).rstrip(b"\r\n"), lambda: f"{path}:{before() + start}", stats)
        if text is not None:
            yield Document(source, start, text, before)


def _encodable(text: str) -> bool:
    """Whether ``text`` is valid Unicode: a lone surrogate has no UTF-8 form, and the tokenizer would abort on it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _jsonl(piece: TextPiece, field_name: str, stats: SourceStats) -> Iterator[Document]:
    path, before = piece.path, _LinesBefore(piece.path, piece.start)
    for number, raw in enumerate(_lines(path, piece), 1):
        def where() -> str:
            return f"{path}:{before() + number}"
        if not raw.strip():
            continue
        text = _decode(raw, where, stats)
        if text is None:
            continue
        try:
            record = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            stats.skip("bad_json", where)
            continue
        value = record.get(field_name) if isinstance(record, dict) else None
        if not isinstance(value, str):
            stats.skip("missing_field", where)
            continue
        if not value.isascii() and not _encodable(value):  # "\ud800": JSON escapes a lone surrogate
            stats.skip("lone_surrogate", where)
            continue
        yield Document(str(path), number, value, before)


def _open_parquet(path: Path, field_name: str):
    """The ``pq.ParquetFile``; UsageError naming the file if it cannot be read or lacks the column."""
    try:
        parquet = open_parquet(path)
    except Exception as e:  # pyarrow raises ArrowInvalid/OSError subclasses for corrupt files
        raise UsageError(f"{path}: not a readable parquet file ({e})") from None
    if field_name not in parquet.schema_arrow.names:
        raise UsageError(f"{path}: no column {field_name!r} (columns: {parquet.schema_arrow.names})")
    return parquet


def _parquet(piece: TextPiece, field_name: str, stats: SourceStats) -> Iterator[Document]:
    path = piece.path
    parquet = _open_parquet(path, field_name)
    metadata = parquet.metadata
    stop = metadata.num_row_groups if piece.stop is None else piece.stop
    groups = list(range(piece.start, stop))
    row = sum(metadata.row_group(g).num_rows for g in range(piece.start))
    if not groups:
        return
    for batch in parquet.iter_batches(columns=[field_name], batch_size=8192, row_groups=groups):
        for value in batch.column(0).to_pylist():
            if isinstance(value, str):
                yield Document(str(path), row, value)
            else:
                stats.skip("missing_field", f"{path}:row {row}")
            row += 1


def _boundary(f, offset: int, size: int, doc_sep: str) -> int:
    """The first document boundary at or after ``offset`` in an open .txt/.jsonl file: the start of a line
    (``doc_sep`` "line", and .jsonl), or the end of a blank line (``"blank"``: a paragraph never straddles
    it); ``size`` if none."""
    if offset <= 0:
        return 0
    f.seek(offset - 1)
    position = offset - 1
    while position < size:  # to the end of the line holding byte offset - 1
        block = f.read(_SCAN)
        if not block:
            return size
        newline = block.find(b"\n")
        if newline >= 0:
            position += newline + 1
            break
        position += len(block)
    if doc_sep != "blank":
        return min(position, size)
    f.seek(position)
    for raw in f:  # then to the end of the next blank line
        position += len(raw)
        if not raw.strip(_WHITESPACE):
            return position
    return size


def text_pieces(files: Sequence[Path], world_size: int, *, doc_sep: Literal["line", "blank"],
                field_name: str) -> tuple[list[TextPiece], list[int]]:
    """``(pieces, bytes of each)``: the units a multi-node conversion splits ``files`` into (``rank_split``).

    A .txt/.jsonl file is cut near every ``total / (world_size * BLOCKS_PER_RANK)`` bytes, each cut moved to
    the next document boundary (``_boundary``: only the bytes up to it are read); a .parquet file into its
    row groups. The pieces tile the files in order, so their documents are the files' documents.
    """
    sizes = [path.stat().st_size for path in files]
    block = max(1, math.ceil(sum(sizes) / (world_size * BLOCKS_PER_RANK)))
    pieces: list[TextPiece] = []
    weights: list[int] = []
    for path, size in zip(files, sizes, strict=True):
        if source_kind(path) == "parquet":
            metadata = _open_parquet(path, field_name).metadata
            groups = [metadata.row_group(g).total_byte_size for g in range(metadata.num_row_groups)]
            pieces += [TextPiece(path, g, g + 1) for g in range(len(groups))] or [TextPiece(path, 0, 0)]
            weights += groups or [0]
            continue
        separator = doc_sep if source_kind(path) == "txt" else "line"
        cuts, last = {0, size}, 0
        with open_source(path) as f:
            for offset in range(block, size, block):
                if offset > last:  # else the scan for the last cut passed it: each byte is scanned once at most
                    last = _boundary(f, offset, size, separator)
                    cuts.add(last)
        cuts = sorted(cuts)
        cuts = cuts if len(cuts) > 1 else [0, 0]
        pieces += [TextPiece(path, a, b) for a, b in pairwise(cuts)]
        weights += [b - a for a, b in pairwise(cuts)]
    return pieces, weights


def join_pieces(pieces: Sequence[TextPiece]) -> list[TextPiece]:
    """Adjacent pieces of one file as one; a piece that reaches the file's end (or all its groups) is given
    ``stop`` None, and one that is the whole file is ``TextPiece(path)``."""
    joined: list[TextPiece] = []
    for piece in pieces:
        if joined and joined[-1].path == piece.path and joined[-1].stop == piece.start:
            joined[-1] = TextPiece(piece.path, joined[-1].start, piece.stop)
        else:
            joined.append(piece)
    return [TextPiece(p.path, p.start, None if p.stop == _end(p.path) else p.stop) for p in joined]


def _end(path: Path) -> int:
    if source_kind(path) == "parquet":
        return open_parquet(path).metadata.num_row_groups
    return path.stat().st_size


def iter_documents(files: Sequence[Path | TextPiece], *, doc_sep: Literal["line", "blank"], field_name: str,
                   stats: SourceStats) -> Iterator[Document]:
    """Every non-empty document of ``files`` (whole files, or pieces of them) in order; problems go to ``stats``."""
    for item in files:
        piece = item if isinstance(item, TextPiece) else TextPiece(item if isinstance(item, RemoteRoot) else Path(item))
        kind = source_kind(piece.path)
        documents = (_txt(piece, doc_sep, stats) if kind == "txt" else
                     _jsonl(piece, field_name, stats) if kind == "jsonl" else _parquet(piece, field_name, stats))
        for document in documents:
            if not document.text.strip():
                stats.skip("empty", lambda: f"{document.source}:{document.number}")
                continue
            stats.documents += 1
            yield document
