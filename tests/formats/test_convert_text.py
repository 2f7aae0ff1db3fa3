"""dataio convert text: round trip, chunking, sources, bad input, determinism, manifest."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer

from dataio.cli import main
from dataio.formats.files import sha256_file
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.text.text_convert import frame_and_split
from tests.text_fixtures import MAX_LENGTH, convert, corpus_documents

ROOT = Path(__file__).resolve().parents[2]


def read_rows(folder: Path) -> list[dict]:
    """Every row of every shard, read memory-mapped with plain pyarrow."""
    _, manifest = read_manifest(folder)
    rows = []
    for shard in manifest.shards:
        table = pa.ipc.open_file(pa.memory_map(str(folder / shard.file))).read_all()
        rows += table.to_pylist()
    return rows


def documents_from_rows(rows: list[dict]) -> dict[int, list[int]]:
    ids: dict[int, list[int]] = {}
    for row in sorted(rows, key=lambda r: (r["doc"], r["part"])):
        ids.setdefault(row["doc"], []).extend(row["input_ids"])
    return ids


def test_round_trip_gives_back_the_text(text_shards):
    _, manifest = read_manifest(text_shards)
    tokenizer = Tokenizer.from_file(str(text_shards / "tokenizer.json"))
    info = manifest.options["tokenizer"]
    documents = documents_from_rows(read_rows(text_shards))
    expected = corpus_documents()
    assert len(documents) == len(expected) == manifest.options["num_documents"]
    for index, ids in documents.items():
        assert ids[0] == info["bos_id"] and ids[-1] == info["eos_id"]
        assert tokenizer.decode(ids[1:-1], skip_special_tokens=False) == expected[index]


def test_long_documents_are_split_not_truncated(text_shards):
    _, manifest = read_manifest(text_shards)
    rows = read_rows(text_shards)
    assert max(r["length"] for r in rows) <= MAX_LENGTH
    assert all(r["length"] == len(r["input_ids"]) for r in rows)
    split_docs = {r["doc"] for r in rows if r["part"] > 0}
    assert len(split_docs) == manifest.options["split_documents"] > 0
    assert [c.tolist() for c in frame_and_split(list(range(10)), 100, 101, 4)] == [[100, 0, 1, 2], [3, 4, 5, 6], [7, 8, 9, 101]]


def test_manifest_counts_histogram_and_checksums(text_shards):
    _, manifest = read_manifest(text_shards)
    rows = read_rows(text_shards)
    options = manifest.options
    assert manifest.kind == "text" and manifest.num_samples == len(rows) and len(manifest.shards) > 1
    assert options["num_tokens"] == sum(r["length"] for r in rows) == sum(s.num_tokens for s in manifest.shards)
    assert sum(count for _, _, count in options["length_histogram"]) == len(rows)
    assert options["token_dtype"] == "uint16"
    assert options["tokenizer"]["sha256"] == sha256_file(text_shards / "tokenizer.json")
    for shard in manifest.shards:
        assert sha256_file(text_shards / shard.file) == shard.sha256
        schema = pa.ipc.open_file(pa.memory_map(str(text_shards / shard.file))).schema
        assert schema.field("input_ids").type == pa.list_(pa.uint16())
    assert not list(text_shards.glob(".*partial"))


def test_jsonl_parquet_and_paragraph_sources(tmp_path):
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_bytes(b'{"text": "first record"}\n{"body": "no text field"}\nnot json\n{"text": ""}\n'
                      b'{"text": "second record"}\n{"text": "bad \xff utf8"}\n')
    pq.write_table(pa.table({"content": ["parquet one", None, "parquet two"]}), tmp_path / "b.parquet")
    out = convert([jsonl], tmp_path / "out_jsonl")
    _, manifest = read_manifest(out)
    assert manifest.options["num_documents"] == 2
    assert manifest.options["skipped"] == {"missing_field": 1, "bad_json": 1, "empty": 1, "bad_utf8": 1}
    rejected = json.loads((out / "rejected.json").read_text())
    assert rejected["examples"]["bad_json"] == [f"{jsonl}:3"]
    out = convert([tmp_path / "b.parquet"], tmp_path / "out_parquet", field="content")
    assert read_manifest(out)[1].options["num_documents"] == 2
    paragraphs = tmp_path / "p.txt"
    paragraphs.write_text("line one\nline two\n\n\nsecond paragraph\n\nthird\n")
    out = convert([paragraphs], tmp_path / "out_blank", doc_sep="blank")
    tokenizer = Tokenizer.from_file(str(out / "tokenizer.json"))
    texts = [tokenizer.decode(ids[1:-1]) for ids in documents_from_rows(read_rows(out)).values()]
    assert texts == ["line one\nline two", "second paragraph", "third"]


def test_given_tokenizer_and_no_special_tokens(text_shards, text_corpus, tmp_path):
    from dataio.formats.text.tokenizer_setup import TokenizerConfig

    config = TokenizerConfig(path=text_shards / "tokenizer.json", bos=None, eos=None)
    out = convert([text_corpus], tmp_path / "out", tokenizer=config)
    _, manifest = read_manifest(out)
    assert manifest.options["tokenizer"]["sha256"] == read_manifest(text_shards)[1].options["tokenizer"]["sha256"]
    assert manifest.options["tokenizer"]["bos_id"] is None
    assert manifest.options["num_tokens"] == read_manifest(text_shards)[1].options["num_tokens"] - 2 * 300


def test_webdataset_format(text_corpus, tmp_path):
    out = convert([text_corpus], tmp_path / "out", format="wds")
    _, manifest = read_manifest(out)
    ids = {}
    with tarfile.open(out / manifest.shards[0].file) as tar:
        for member in tar:
            if member.name.endswith(".input_ids.npy"):
                ids[member.name.split(".")[0]] = np.load(io.BytesIO(tar.extractfile(member).read()), allow_pickle=False)
    arrow = read_rows(convert([text_corpus], tmp_path / "arrow"))
    assert len(ids) == manifest.num_samples == len(arrow)
    first = arrow[0]
    assert ids[f"{first['doc']:09d}_{first['part']:04d}"].tolist() == first["input_ids"]


def _cli(*args: str, threads: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAYON_RS_NUM_CPUS=threads, RAYON_NUM_THREADS=threads)
    return subprocess.run([sys.executable, "-m", "dataio", "convert", "text", *args], env=env, capture_output=True,
                          text=True, timeout=300)


def test_output_is_identical_whatever_the_thread_count(text_corpus, tmp_path):
    for threads in ("1", "2"):
        result = _cli(str(text_corpus), str(tmp_path / threads), "--train-tokenizer", "bpe", "--vocab-size", "600",
                      "--shard-tokens", "4000", "--no-progress", threads=threads)
        assert result.returncode == 0, result.stderr
    assert (tmp_path / "1" / "manifest.json").read_text() == (tmp_path / "2" / "manifest.json").read_text()


def test_bad_invocations_exit_2(text_corpus, tmp_path, capsys):
    src = str(text_corpus)
    cases = [
        ([src, str(tmp_path / "o")], "exactly one of"),
        ([src, str(tmp_path / "o"), "--tokenizer", src, "--train-tokenizer", "bpe"], "exactly one of"),
        ([str(tmp_path / "missing.txt"), str(tmp_path / "o"), "--train-tokenizer", "bpe"], "does not exist"),
        ([str(tmp_path), str(tmp_path / "o"), "--train-tokenizer", "bpe"], "no .txt"),
        ([src, str(tmp_path / "o"), "--tokenizer", src], "not a tokenizers JSON"),
        ([src, str(tmp_path / "o"), "--train-tokenizer", "bpe", "--vocab-size", "100"], "vocab-size"),
    ]
    for args, message in cases:
        assert main(["convert", "text", *args, "--no-progress"]) == 2, args
        assert message in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert main(["convert", "text", src, str(tmp_path / "full"), "--train-tokenizer", "bpe", "--no-progress"]) == 2
    assert "not empty" in capsys.readouterr().err
