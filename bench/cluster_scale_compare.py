"""Whether two output folders hold the same samples in the same order, as the scale run states it.

Images: the sample tables' columns that say what a sample is (source path, label, size, per-sample xxh3) equal
row for row; where a sample lies (shard, offset) may differ, since each item closes its own last shard. The
``key`` column is compared apart and reported: a part numbers its tar keys from 0, as a torchrun rank's does.
Text: every row's token ids, length and part equal, read through the manifest's shard order; ``doc`` ids are
equal up to the gaps a part leaves before its first id (``formats/text/doc_ids.py``: an upper bound of the
documents before it, so ids stay unique and in corpus order), so the same rows must start a new document.
"""

from __future__ import annotations

import json
from pathlib import Path

from dataio.formats.file_gate import open_input, read_input
from dataio.formats.limits import MAX_STATE_FILE_BYTES

import numpy as np
import pyarrow as pa
from pyarrow import ipc

IMAGE_COLUMNS = ["label", "width", "height", "path", "xxh3"]
TEXT_COLUMNS = ["input_ids", "length", "part"]


def _read(path: Path) -> pa.Table:
    with open_input(path) as source:  # the gate: a regular file of the run's own output
        return ipc.open_file(source).read_all()


def image_rows(folder: Path) -> pa.Table:
    return _read(folder / "samples.arrow")


def text_rows(folder: Path) -> pa.Table:
    manifest = json.loads(read_input(folder / "manifest.json", MAX_STATE_FILE_BYTES))
    return pa.concat_tables([_read(folder / shard["file"]) for shard in manifest["shards"]])


def _document_starts(doc: np.ndarray) -> np.ndarray:
    """Which rows start a document (its id differs from the row before); -1 where ids go down (never right)."""
    starts = np.ones(len(doc), dtype=np.int8)
    if len(doc) > 1:
        steps = np.diff(doc.astype(np.int64))
        starts[1:] = np.where(steps < 0, -1, steps > 0)
    return starts


def same_samples(kind: str, left: Path, right: Path) -> dict:
    """{"same": bool, "rows": [left, right], "first_difference": row or None, ...} for two outputs of ``kind``."""
    rows, columns = (image_rows, IMAGE_COLUMNS) if kind == "images" else (text_rows, TEXT_COLUMNS)
    whole_a, whole_b = rows(left), rows(right)
    a, b = whole_a.select(columns), whole_b.select(columns)
    same = a.num_rows == b.num_rows and a.equals(b)
    report: dict = {"compared": columns, "rows": [a.num_rows, b.num_rows]}
    if kind == "images":
        keys = [whole_a.column("key").to_pylist(), whole_b.column("key").to_pylist()]
        report["keys_equal"] = keys[0] == keys[1]
        report["distinct_keys"] = [len(set(k)) for k in keys]
    elif same:
        docs = [whole_a.column("doc").to_numpy(), whole_b.column("doc").to_numpy()]
        same = bool(np.array_equal(_document_starts(docs[0]), _document_starts(docs[1])))
        report["doc_ids_equal"] = bool(np.array_equal(docs[0], docs[1]))
    first = None
    if not same:
        first = next((i for i in range(min(a.num_rows, b.num_rows))
                      if a.slice(i, 1).to_pylist() != b.slice(i, 1).to_pylist()), min(a.num_rows, b.num_rows))
    return {"same": same, "first_difference": first, **report}
