"""Image shards as Arrow IPC streams in the Hugging Face image layout (``--format arrow``).

Each ``shard-NNNNNN.arrow`` holds one record batch with columns ``image`` (a struct of ``bytes``
and ``path``, what HF's ``Image`` feature stores), ``label`` (int64, HF's ``ClassLabel``) and
``key``, with HF's ``features`` in the schema metadata: plain pyarrow (``pa.ipc.open_stream``) and
HF ``datasets`` (``Dataset.from_file``) read it. An IPC stream stores each column's values in one
contiguous, uncompressed buffer, so every image's bytes lie at a fixed offset in the file: the
sample table records it, and ``ImageLoader`` reads an image with one ``pread`` exactly as from a
tar (region decoding and restart-marker splicing included). Same interface as ``ShardWriter``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dataio.formats.errors import OutputError
from dataio.formats.files import sha256_file
from dataio.formats.file_gate import map_input, open_new
from dataio.formats.dataset.manifest import ShardEntry
from dataio.formats.dataset.shard_rule import closes_shard
from dataio.formats.dataset.wds_shards import MemberLocation

IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
IMAGE_FIELDS = [("image", IMAGE_TYPE), ("label", pa.int64()), ("key", pa.string())]
ROW_OVERHEAD = 64  # bytes of offsets and validity per row, for the size bound


def image_schema(classes: tuple[str, ...]) -> pa.Schema:
    """The shard schema with HF's ``features`` metadata (Image, ClassLabel with the class names)."""
    features = {"image": {"_type": "Image"}, "label": {"_type": "ClassLabel", "names": list(classes)},
                "key": {"dtype": "string", "_type": "Value"}}
    return pa.schema(IMAGE_FIELDS, metadata={"huggingface": json.dumps({"info": {"features": features}})})


def shard_name(index: int) -> str:
    return f"shard-{index:06d}.arrow"


def image_locations(path: str | Path) -> list[list[MemberLocation]]:
    """Where each row's image bytes lie in the file: ``[[MemberLocation(key, "jpg", offset, size)]]``."""
    source = map_input(path)  # the gate's mapping: a regular file only, opened once
    base = source.read_buffer().address  # a zero-copy view of the whole mapping: its start
    source.seek(0)
    reader = pa.ipc.open_stream(source)
    samples = []
    for batch in reader:
        images = batch.column("image").field("bytes")
        keys = batch.column("key").to_pylist()
        _, offsets_buffer, data = images.buffers()
        offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[images.offset:images.offset + len(images) + 1]
        start = data.address - base
        for row, key in enumerate(keys):
            samples.append([MemberLocation(key, "jpg", start + int(offsets[row]), int(offsets[row + 1] - offsets[row]))])
    return samples


class ArrowImageWriter:
    """Writes samples into size-bounded ``shard-NNNNNN.arrow`` files in ``folder`` (``ShardWriter``'s interface,
    ``record_sizes`` included)."""

    EMPTY_BYTES = 0

    def __init__(self, folder: str | Path, max_bytes: int, max_count: int | None = None, first_index: int = 0,
                 classes: tuple[str, ...] = ()) -> None:
        if max_bytes < 4096:
            raise ValueError(f"shard size {max_bytes} bytes is too small")
        self.folder = Path(folder)
        self.max_bytes, self.max_count = max_bytes, max_count
        self.next_index = first_index
        self.schema = image_schema(classes)
        self.entries: list[ShardEntry] = []
        self.locations: list[list[list[MemberLocation]]] = []
        self._rows: list[dict[str, Any]] = []
        self._bytes = 0
        self.record_sizes: list[int] = []

    def write(self, sample: dict[str, Any]) -> ShardEntry | None:
        """Add a sample (``__key__``, ``jpg`` bytes, ``cls``, ``json`` with the source path)."""
        size = len(sample["jpg"]) + ROW_OVERHEAD
        full = closes_shard(len(self._rows), self._bytes, size, self.max_bytes, self.max_count)
        finished = self.finish_shard() if full else None
        self._rows.append({"image": {"bytes": sample["jpg"], "path": json.loads(sample["json"])["path"]},
                           "label": int(sample["cls"]), "key": sample["__key__"]})
        self._bytes += size
        self.record_sizes.append(size)
        return finished

    def finish_shard(self) -> ShardEntry | None:
        """Write the buffered rows as one record batch to a temp file, then rename it into place."""
        if not self._rows:
            return None
        name = shard_name(self.next_index)
        tmp = self.folder / f".{name}.partial"
        batch = pa.RecordBatch.from_pylist(self._rows, schema=self.schema)
        try:
            with open_new(tmp) as file:  # created new: a link planted as the temp file is removed, not followed
                with pa.ipc.new_stream(file, self.schema) as writer:
                    writer.write_batch(batch)
                file.flush()
                os.fsync(file.fileno())
            entry = ShardEntry(file=name, num_samples=len(self._rows), bytes=tmp.stat().st_size,
                               sha256=sha256_file(tmp))
            locations = image_locations(tmp)
            os.replace(tmp, self.folder / name)
        except BaseException as e:
            tmp.unlink(missing_ok=True)
            if isinstance(e, OSError):  # disk full: one line naming the shard
                raise OutputError(self.folder / name, e) from None
            raise
        self.entries.append(entry)
        self.locations.append(locations)
        self._rows, self._bytes = [], 0
        self.next_index += 1
        return entry

    def close(self) -> ShardEntry | None:
        return self.finish_shard()

    def abort(self) -> None:
        """Drop the buffered rows (nothing of the open shard is on disk yet)."""
        self._rows, self._bytes = [], 0

    def __enter__(self) -> "ArrowImageWriter":
        return self

    def __exit__(self, kind: type | None, *rest: object) -> None:
        if kind is not None:
            self.abort()
