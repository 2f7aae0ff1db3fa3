"""Token shards: Arrow IPC files of (input_ids, length, doc, part) rows, written atomically.

Each shard ``text-NNNNNN.arrow`` is an Arrow IPC *file* (random access,
memory-mappable by plain ``pyarrow``) with columns:

- ``input_ids``: ``list<uintK>``, K the smallest width that holds the vocabulary;
- ``length``: ``uint32``, tokens in the row (for bucketing without touching ids);
- ``doc``: ``uint64``, id of the source document: its index in a one-process
  conversion; unique and in corpus order, with gaps, over a dataset merged from
  ranks (``dataio.formats.text.doc_ids``); ``part``: ``uint32``, which
  ``max_length`` chunk of it the row is.

A shard is written to ``.text-NNNNNN.arrow.partial`` and renamed when complete.
``ArrowTokenWriter`` has the interface of ``dataio.formats.dataset.wds_shards.ShardWriter``
(``write`` returns the entry of a shard it closed, ``first_index``, context
manager), so the text converter drives either the same way.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from dataio.formats.errors import OutputError
from dataio.formats.files import sha256_file
from dataio.formats.file_gate import open_new
from dataio.formats.dataset.manifest import ShardEntry
from dataio.formats.dataset.shard_rule import closes_shard

ROWS_PER_BATCH = 4096


def token_dtype(vocab_size: int) -> np.dtype:
    """Smallest unsigned integer type that holds every token id."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if vocab_size <= np.iinfo(dtype).max + 1:
            return np.dtype(dtype)
    raise ValueError(f"vocabulary of {vocab_size} does not fit 32 bits")


def text_shard_name(index: int) -> str:
    return f"text-{index:06d}.arrow"


def schema(dtype: np.dtype) -> pa.Schema:
    return pa.schema([("input_ids", pa.list_(pa.from_numpy_dtype(dtype))), ("length", pa.uint32()),
                      ("doc", pa.uint64()), ("part", pa.uint32())], metadata={"dataio": "text/1"})


class ArrowTokenWriter:
    """Writes token rows into shards of about ``max_tokens`` tokens each."""

    def __init__(self, folder: Path, dtype: np.dtype, max_tokens: int, first_index: int = 0) -> None:
        if max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        self.folder, self.dtype, self.max_tokens = folder, dtype, max_tokens
        self.next_index = first_index
        self.schema = schema(dtype)
        self.entries: list[ShardEntry] = []
        self._rows: list[tuple[np.ndarray, int, int]] = []
        self._writer: pa.ipc.RecordBatchFileWriter | None = None
        self._file: BinaryIO | None = None
        self._tmp: Path | None = None
        self._samples = self._tokens = 0

    def write(self, ids: np.ndarray, doc: int, part: int) -> ShardEntry | None:
        """Add a row; returns the entry of the shard this closed first (when it was full), else None."""
        finished = None
        if closes_shard(self._samples, self._tokens, len(ids), self.max_tokens, None):  # what a merge replays
            finished = self.finish_shard()
        self._rows.append((ids.astype(self.dtype, copy=False), doc, part))
        self._samples += 1
        self._tokens += len(ids)
        if len(self._rows) >= ROWS_PER_BATCH:
            self._flush()
        return finished

    def _flush(self) -> None:
        with self._output_errors():
            self._flush_rows()

    @contextmanager
    def _output_errors(self) -> Iterator[None]:
        """Disk full: one line naming the shard, and no partial file left."""
        try:
            yield
        except OSError as e:
            where = self.folder / text_shard_name(self.next_index)
            self.abort()
            raise OutputError(where, e) from None

    def _flush_rows(self) -> None:
        if not self._rows:
            return
        if self._writer is None:
            self._tmp = self.folder / f".{text_shard_name(self.next_index)}.partial"
            self._file = open_new(self._tmp)  # created new by the gate: pyarrow given a path would follow a link
            self._writer = pa.ipc.new_file(self._file, self.schema)
        lengths = np.array([len(ids) for ids, _, _ in self._rows], dtype=np.int64)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
        np.cumsum(lengths, out=offsets[1:])
        values = np.concatenate([ids for ids, _, _ in self._rows]).astype(self.dtype, copy=False)
        columns = [pa.ListArray.from_arrays(pa.array(offsets), pa.array(values)),
                   pa.array(lengths.astype(np.uint32)),
                   pa.array(np.array([d for _, d, _ in self._rows], dtype=np.uint64)),
                   pa.array(np.array([p for _, _, p in self._rows], dtype=np.uint32))]
        self._writer.write_batch(pa.record_batch(columns, schema=self.schema))
        self._rows = []

    def finish_shard(self) -> ShardEntry | None:
        """Close the open shard, checksum it and rename it into place."""
        self._flush()
        if self._writer is None:
            return None
        assert self._tmp is not None
        name = text_shard_name(self.next_index)
        with self._output_errors():
            self._writer.close()
            self._close_file(sync=True)
            entry = ShardEntry(file=name, num_samples=self._samples, bytes=self._tmp.stat().st_size,
                               sha256=sha256_file(self._tmp), num_tokens=self._tokens)
            os.replace(self._tmp, self.folder / name)
        self.entries.append(entry)
        self.next_index += 1
        self._writer, self._tmp = None, None
        self._samples = self._tokens = 0
        return entry

    def close(self) -> ShardEntry | None:
        return self.finish_shard()

    def __enter__(self) -> "ArrowTokenWriter":
        return self

    def __exit__(self, kind: type | None, *rest: object) -> None:
        """On an exception (or interrupt), drop the partial shard; the finished ones stay."""
        if kind is not None:
            self.abort()

    def _close_file(self, sync: bool) -> None:
        """Close the open shard's file (pyarrow's writer leaves it open), flushed to disk first if ``sync``."""
        file, self._file = self._file, None
        if file is not None:
            with file:
                if sync:
                    file.flush()
                    os.fsync(file.fileno())

    def abort(self) -> None:
        """Drop the open shard's partial file."""
        if self._writer is not None:
            try:
                self._writer.close()
            except (OSError, pa.ArrowException):
                pass
        try:
            self._close_file(sync=False)
        except OSError:
            pass
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
        self._writer, self._tmp, self._rows = None, None, []
