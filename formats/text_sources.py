"""Documents from .txt, .jsonl and .parquet files, with bad input counted, not fatal.

``iter_documents`` yields ``Document(source, number, text)`` in file order.
Empty documents and undecodable ones (bad UTF-8, bad JSON, a missing or
non-string field, a lone surrogate such as the JSON escape ``"\\ud800"``)
are tallied in ``SourceStats`` with a few examples each, so the converter
can report them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pyarrow.parquet as pq

from dataio.formats.errors import UsageError

SUFFIXES = {".txt": "txt", ".text": "txt", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet"}
EXAMPLES = 5  # problems kept per kind for the report


@dataclass(frozen=True)
class Document:
    source: str
    number: int  # line (txt/jsonl, 1-based) or row (parquet, 0-based) where it starts
    text: str


@dataclass
class SourceStats:
    """What was read: documents kept, and each kind of skipped input with examples."""

    documents: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def skip(self, kind: str, where: str) -> None:
        self.skipped[kind] = self.skipped.get(kind, 0) + 1
        examples = self.examples.setdefault(kind, [])
        if len(examples) < EXAMPLES:
            examples.append(where)


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
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        elif path.is_file():
            source_kind(path)
            files.append(path)
        else:
            raise UsageError(f"{path} does not exist")
    if not files:
        raise UsageError(f"no .txt, .jsonl or .parquet files in {', '.join(map(str, paths))}")
    return files


def _decode(raw: bytes, where: str, stats: SourceStats) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        stats.skip("bad_utf8", where)
        return None


def _txt(path: Path, doc_sep: str, stats: SourceStats) -> Iterator[Document]:
    with open(path, "rb") as f:
        if doc_sep == "line":
            for number, raw in enumerate(f, 1):
                text = _decode(raw.rstrip(b"\r\n"), f"{path}:{number}", stats)
                if text is not None:
                    yield Document(str(path), number, text)
            return
        lines: list[bytes] = []
        start = 1
        for number, raw in enumerate(f, 1):
            if raw.strip():
                if not lines:
                    start = number
                lines.append(raw)
            elif lines:
                text = _decode(b"".join(lines).rstrip(b"\r\n"), f"{path}:{start}", stats)
                if text is not None:
                    yield Document(str(path), start, text)
                lines = []
        if lines:
            text = _decode(b"".join(lines).rstrip(b"\r\n"), f"{path}:{start}", stats)
            if text is not None:
                yield Document(str(path), start, text)


def _encodable(text: str) -> bool:
    """Whether ``text`` is valid Unicode: a lone surrogate has no UTF-8 form, and the tokenizer would abort on it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _jsonl(path: Path, field_name: str, stats: SourceStats) -> Iterator[Document]:
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            where = f"{path}:{number}"
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
            yield Document(str(path), number, value)


def _parquet(path: Path, field_name: str, stats: SourceStats) -> Iterator[Document]:
    try:
        parquet = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises ArrowInvalid/OSError subclasses for corrupt files
        raise UsageError(f"{path}: not a readable parquet file ({e})") from None
    if field_name not in parquet.schema_arrow.names:
        raise UsageError(f"{path}: no column {field_name!r} (columns: {parquet.schema_arrow.names})")
    row = 0
    for batch in parquet.iter_batches(columns=[field_name], batch_size=8192):
        for value in batch.column(0).to_pylist():
            if isinstance(value, str):
                yield Document(str(path), row, value)
            else:
                stats.skip("missing_field", f"{path}:row {row}")
            row += 1


def iter_documents(files: list[Path], *, doc_sep: Literal["line", "blank"], field_name: str,
                   stats: SourceStats) -> Iterator[Document]:
    """Every non-empty document of ``files`` in order; problems go to ``stats``."""
    for path in files:
        kind = source_kind(path)
        documents = (_txt(path, doc_sep, stats) if kind == "txt" else
                     _jsonl(path, field_name, stats) if kind == "jsonl" else _parquet(path, field_name, stats))
        for document in documents:
            if not document.text.strip():
                stats.skip("empty", f"{document.source}:{document.number}")
                continue
            stats.documents += 1
            yield document
