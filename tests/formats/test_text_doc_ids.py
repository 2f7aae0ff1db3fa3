"""Text converted across ranks, then merged: the documented ``doc`` column is unique over the merged dataset."""

from __future__ import annotations

from itertools import pairwise

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataio.formats.dataset.manifest import read_manifest

ROOT = Path(__file__).resolve().parents[2]


def convert_text(sources: list[Path], out: Path, *extra: str) -> None:
    command = [sys.executable, "-m", "dataio", "convert", "text", *map(str, sources), str(out), "--train-tokenizer",
               "bpe", "--vocab-size", "600", "--max-length", "96", "--shard-tokens", "4000", "--no-progress", *extra]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr


def doc_rows(folder: Path) -> list[tuple[int, int]]:
    """``(doc, part)`` of every row of the dataset, in order, as a plain pyarrow or tar reader sees them."""
    root, manifest = read_manifest(folder)
    rows = []
    for entry in manifest.shards:
        path = root / entry.file
        if path.suffix == ".arrow":
            table = pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
            rows += list(zip(table.column("doc").to_pylist(), table.column("part").to_pylist(), strict=True))
            continue
        with tarfile.open(path) as tar:
            for member in tar:
                if member.name.endswith(".json"):
                    meta = json.load(io.BytesIO(tar.extractfile(member).read()))
                    rows.append((meta["doc"], meta["part"]))
    return rows


@pytest.mark.parametrize("kind", ["txt", "parquet", "wds"])
def test_merged_doc_ids_are_unique_and_in_corpus_order(text_corpus, tmp_path, kind):
    documents = text_corpus.read_text(encoding="utf-8").splitlines()
    extra: tuple[str, ...] = ("--format", "wds") if kind == "wds" else ()
    if kind == "parquet":
        source = tmp_path / "corpus.parquet"
        pq.write_table(pa.table({"text": documents}), source, row_group_size=40)
    else:
        source = text_corpus
    convert_text([source], tmp_path / "one", *extra)
    for rank in range(2):
        convert_text([source], tmp_path / "two", "--rank", str(rank), "--world-size", "2", *extra)
    merged, single = doc_rows(tmp_path / "two"), doc_rows(tmp_path / "one")
    assert len(merged) == len(single)
    documents_of = [doc for doc, part in merged if part == 0]
    assert len(set(documents_of)) == len(documents_of) == len({doc for doc, _ in single})  # one id per document
    assert documents_of == sorted(documents_of)  # in corpus order, as the rows are
    assert all(doc == previous for (previous, _), (doc, part) in pairwise(merged) if part > 0)  # chunks
    rank0 = read_manifest(tmp_path / "two" / "rank-00000-of-00002")[1].num_samples
    assert merged[:rank0] == single[:rank0]  # rank 0 numbers as a one-process conversion does
