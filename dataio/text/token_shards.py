"""Memory-mapped access to the token shards of ``dataio convert text``.

Shards are Arrow IPC files opened with ``pyarrow.memory_map``: the token ids
are never copied into RAM as a whole; ``tokens(i)`` is a zero-copy numpy view
of sample ``i``. Each shard is checked against the manifest first (present,
right size, schema; sha256 with ``verify_checksums``), and an error names it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from dataio.formats.errors import SampleError, ShardError
from dataio.formats.file_gate import map_input
from dataio.formats.dataset.manifest import Manifest, check_shard_file, read_manifest
from dataio.formats.dataset.shard_rule import replay_shards
from dataio.text.collate import TokenArrays


class TokenShards:
    """Every sample's token ids (views into memory maps) and lengths, by global sample index."""

    def __init__(self, source: str | Path, verify_checksums: bool = False) -> None:
        self.folder, self.manifest = read_manifest(source)
        m: Manifest = self.manifest
        if m.kind != "text" or m.options.get("format", "arrow") != "arrow":
            raise ShardError(str(self.folder), f"holds {m.kind!r} shards in format {m.options.get('format')!r}, "
                                               "not Arrow token shards (convert with `dataio convert text`)")
        self.tokenizer = dict(m.options.get("tokenizer", {}))
        self.pad_id = int(self.tokenizer.get("pad_id", 0))
        self.vocab_size = int(self.tokenizer.get("vocab_size", 0))  # 0: unknown, ids are not checked
        self._values: list[np.ndarray] = []
        chunk_of, starts, lengths = [], [], []
        for entry in m.shards:
            path = self.folder / entry.file
            check_shard_file(path, entry, verify_checksums)
            try:
                reader = pa.ipc.open_file(map_input(path))  # mapped by the gate: a FIFO shard is refused, not waited on
                count = 0
                for i in range(reader.num_record_batches):
                    batch = reader.get_batch(i)
                    batch.validate(full=True)  # offsets within bounds: a corrupt shard fails here, not later
                    ids = batch.column("input_ids")
                    offsets = ids.offsets.to_numpy()
                    chunk_of.append(np.full(len(ids), len(self._values), dtype=np.int32))
                    starts.append(offsets[:-1].astype(np.int64) + 0)
                    lengths.append(np.diff(offsets).astype(np.int64))
                    self._values.append(ids.values.to_numpy(zero_copy_only=True))
                    count += len(ids)
            except (pa.ArrowException, KeyError, OSError) as e:
                raise ShardError(str(path), f"not a readable token shard ({e})") from None
            if count != entry.num_samples:
                raise ShardError(str(path), f"{count} rows, manifest says {entry.num_samples}")
        empty = np.zeros(0, dtype=np.int64)
        self._chunk_of = np.concatenate(chunk_of) if chunk_of else np.zeros(0, dtype=np.int32)
        self._starts = np.concatenate(starts) if starts else empty
        self.lengths = np.concatenate(lengths) if lengths else empty
        self.shard_of = np.repeat(np.arange(len(m.shards)), [e.num_samples for e in m.shards])
        order_tokens = m.options.get("order_shard_tokens")  # a merged split conversion's (``rank_merge``)
        self.order_shard_of = self.shard_of if order_tokens is None else replay_shards(
            self.lengths.tolist(), max_bytes=int(order_tokens), max_count=None, empty_bytes=0)
        self._shard_start = np.concatenate([[0], np.cumsum([e.num_samples for e in m.shards])]).astype(np.int64)
        self.shard_names = [e.file for e in m.shards]  # for errors: a mixture's are "source/file"
        self._closed = False

    @classmethod
    def concat(cls, parts: dict[str, "TokenShards"]) -> "TokenShards":
        """The samples of several sources end to end (a mixture), as one ``TokenShards``: source ``s``'s sample
        ``i`` is ``offset_s + i``. The sources must share a tokenizer (the same ids mean the same tokens)."""
        first = next(iter(parts.values()))
        for name, part in parts.items():
            if part.tokenizer.get("sha256") != first.tokenizer.get("sha256"):
                raise ValueError(f"source {name!r} ({part.folder}) was tokenised with another tokenizer than "
                                 f"{next(iter(parts))!r}: mixed ids would mean different tokens")
        out = object.__new__(cls)
        out.folder, out.manifest = first.folder, first.manifest
        out.tokenizer, out.pad_id, out.vocab_size = first.tokenizer, first.pad_id, first.vocab_size
        out._values, chunk_of, shard_of, out.shard_names, order_of = [], [], [], [], []
        for name, part in parts.items():
            chunk_of.append(part._chunk_of + len(out._values))
            shard_of.append(part.shard_of + len(out.shard_names))
            order_of.append(part.order_shard_of + sum(int(o.max(initial=-1)) + 1 for o in order_of))
            out._values += part._values
            out.shard_names += [f"{name}/{file}" for file in part.shard_names]
        out._chunk_of = np.concatenate(chunk_of)
        out._starts = np.concatenate([p._starts for p in parts.values()])
        out.lengths = np.concatenate([p.lengths for p in parts.values()])
        out.shard_of = np.concatenate(shard_of)
        out.order_shard_of = np.concatenate(order_of)
        sizes = [np.diff(p._shard_start) for p in parts.values()]
        out._shard_start = np.concatenate([[0], np.cumsum(np.concatenate(sizes))]).astype(np.int64)
        out._parts = list(parts.values())
        out._closed = False
        return out

    def __len__(self) -> int:
        return len(self.lengths)

    def tokens(self, sample: int) -> np.ndarray:
        """Token ids of ``sample``: a read-only view into the memory-mapped shard."""
        if self._closed:
            raise ValueError(f"{self.folder}: the loader was closed")
        start = self._starts[sample]
        return self._values[self._chunk_of[sample]][start:start + self.lengths[sample]]

    def key(self, sample: int) -> str:
        """``sample``'s name in errors: its row in its shard."""
        return str(int(sample - self._shard_start[self.shard_of[sample]]))

    def checked_tokens(self, sample: int) -> np.ndarray:
        """``tokens(sample)``, or a ``SampleError`` naming shard and row if an id is past the vocabulary.

        Such an id would otherwise reach the model's embedding and fail there
        with an IndexError that names nothing.
        """
        tokens = self.tokens(sample)
        if self.vocab_size and len(tokens) and int(tokens.max()) >= self.vocab_size:
            raise self.past_vocabulary_error(sample, int(tokens.max()))
        return tokens

    @property
    def arrays(self) -> TokenArrays:
        """The chunks and per-sample positions, for ``collate.padded_rows``."""
        if self._closed:
            raise ValueError(f"{self.folder}: the loader was closed")
        return TokenArrays(self._values, self._chunk_of, self._starts, self.lengths)

    def past_vocabulary(self, samples: np.ndarray, ids: np.ndarray, largest: int) -> list[tuple[int, SampleError]]:
        """Rows of ``ids`` (``collate.padded_rows(samples, ...)``, whose largest id is ``largest``) holding an id
        at or past the vocabulary size, each with a ``SampleError`` naming its shard and row: the common case
        is one comparison, and a bad batch one reduction, not one per row."""
        if not self.vocab_size or largest < self.vocab_size:
            return []
        lengths = self.lengths[samples]  # each row's tokens: padding aside, as ``largest``
        largest = np.where(np.arange(ids.shape[1]) < lengths[:, None], ids, -1).max(axis=1, initial=-1)
        return [(int(row), self.past_vocabulary_error(int(samples[row]), int(largest[row])))
                for row in np.flatnonzero(largest >= self.vocab_size)]

    def past_vocabulary_error(self, sample: int, largest: int) -> SampleError:
        shard = self.shard_names[int(self.shard_of[sample])]
        return SampleError(shard, self.key(sample), f"token id {largest} is not below the vocabulary size "
                                                    f"{self.vocab_size}")

    def close(self) -> None:
        """Drop the views into the memory maps, so they are unmapped once no batch holds one."""
        self._values, self._closed = [], True
        for part in getattr(self, "_parts", ()):
            part.close()
