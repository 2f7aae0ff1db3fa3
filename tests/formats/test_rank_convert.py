"""Conversion across nodes: N ranks, each its share, merged = a one-process conversion of the same input."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataio import ImageLoader
from dataio.cli import main
from dataio.errors import DataioError
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.ranks.rank_merge import merge_ranks
from dataio.formats.ranks.rank_split import rank_folder
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.formats.text.tokenizer_setup import TokenizerConfig
from dataio.formats.dataset.verify import verify
from dataio.text.token_shards import TokenShards
from tests.formats.journal_stop import Interrupted, interrupt_after
from tests.text_fixtures import convert


def _images(folder) -> list[tuple[bytes, int, str]]:
    """(image bytes, label, source path) of every sample, in order."""
    root, manifest = read_manifest(folder)
    table = read_sample_table(root / manifest.sample_table)
    samples = []
    for i in range(len(table)):
        with open(root / manifest.shards[int(table.shard[i])].file, "rb") as handle:
            handle.seek(int(table.offset[i]))
            samples.append((handle.read(int(table.size[i])), int(table.label[i]), table.path(i)))
    return samples


def _convert(src, out, **options):
    return convert_images(ConvertImagesConfig(src=src, out=out, num_workers=1, progress=False,
                                              max_shard_samples=4, **options))


@pytest.fixture(scope="module")
def one_process(image_folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("one") / "out"
    _convert(image_folder[0], out)
    return _images(out), read_manifest(out)[1]


@pytest.mark.parametrize("world_size", [1, 2, 3, 64])
def test_merged_images_equal_a_one_process_conversion(image_folder, one_process, tmp_path, world_size):
    """Same samples, labels, bytes and order, for N = 1, 2, 3 and more ranks than files (64 > 45)."""
    out = tmp_path / "out"
    for rank in reversed(range(world_size)):  # any finishing order: the last one merges
        _convert(image_folder[0], out, rank=rank, world_size=world_size)
    expected, manifest = one_process
    assert _images(out) == expected
    merged = read_manifest(out)[1]
    assert merged.classes == manifest.classes and merged.num_rejected == manifest.num_rejected
    assert verify(out, deep=True).ok
    if world_size > 1:
        assert merged.options["ranks"] == world_size and all(s.file.startswith("rank-") for s in merged.shards)
        lines = sorted((out / "rejected.jsonl").read_text().splitlines())
        assert len(lines) == manifest.num_rejected


def test_merged_images_load_as_the_one_process_conversion(image_folder, tmp_path):
    _convert(image_folder[0], tmp_path / "one")
    for rank in range(3):
        _convert(image_folder[0], tmp_path / "three", rank=rank, world_size=3)
    with ImageLoader(tmp_path / "one", batch_size=8, image_size=24, train=False) as a, \
            ImageLoader(tmp_path / "three", batch_size=8, image_size=24, train=False) as b:
        for (x, y), (u, v) in zip(a, b, strict=True):
            assert np.array_equal(x.numpy(), u.numpy()) and np.array_equal(y.numpy(), v.numpy())


def test_a_rank_that_has_not_finished_is_named_by_merge(image_folder, tmp_path, capsys):
    out = tmp_path / "out"
    _convert(image_folder[0], out, rank=0, world_size=3)
    _convert(image_folder[0], out, rank=2, world_size=3)
    assert not (out / "manifest.json").exists()
    with pytest.raises(DataioError, match=r"rank\(s\) 1 of 3 have not finished"):
        merge_ranks(out)
    assert main(["merge", str(out)]) == 1
    assert "rank(s) 1 of 3" in capsys.readouterr().err
    _convert(image_folder[0], out, rank=1, world_size=3)  # the last one merges
    assert read_manifest(out)[1].options["ranks"] == 3


def test_the_cli_takes_ranks_from_slurm_array_variables(image_folder, tmp_path, monkeypatch, one_process):
    out = tmp_path / "out"
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "2")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "1")
    for task in ("1", "2"):  # --array=1-2
        monkeypatch.setenv("SLURM_ARRAY_TASK_ID", task)
        assert main(["convert", "images", str(image_folder[0]), str(out), "--no-progress", "--workers", "1",
                     "--max-shard-samples", "4"]) == 0
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["rank-00000-of-00002", "rank-00001-of-00002"]
    assert _images(out) == one_process[0]
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "7")
    assert main(["convert", "images", str(image_folder[0]), str(tmp_path / "x"), "--no-progress"]) == 2


def _token_rows(folder) -> list[list[int]]:
    shards = TokenShards(folder)
    rows = [shards.tokens(i).tolist() for i in range(len(shards))]
    shards.close()
    return rows


@pytest.mark.parametrize("world_size", [2, 3, 5])
def test_merged_text_equals_a_one_process_conversion(text_corpus, text_shards, tmp_path, world_size):
    """Several files, one tokenizer trained by rank 0: the same rows, splits and lengths as one process."""
    sources = []
    lines = text_corpus.read_text(encoding="utf-8").splitlines(keepends=True)
    for part in range(4):
        path = tmp_path / "src" / f"part-{part}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text("".join(lines[part * 75:(part + 1) * 75]), encoding="utf-8")
        sources.append(path)
    one = convert(sources, tmp_path / "one", shard_tokens=4000)
    for rank in range(world_size):
        convert(sources, tmp_path / "many", shard_tokens=4000, rank=rank, world_size=world_size)
    assert _token_rows(tmp_path / "many") == _token_rows(one)
    merged, single = read_manifest(tmp_path / "many")[1], read_manifest(one)[1]
    for key in ("num_documents", "num_tokens", "split_documents", "length_histogram", "tokenizer"):
        assert merged.options[key] == single.options[key], key
    assert (tmp_path / "many" / "tokenizer.json").read_bytes() == (one / "tokenizer.json").read_bytes()
    assert verify(tmp_path / "many", deep=True).ok


def test_ranks_with_different_tokenizers_are_refused_at_merge(text_corpus, tmp_path):
    tokenizers = [convert([text_corpus], tmp_path / f"tok{vocab}", tokenizer=TokenizerConfig(
        train="bpe", vocab_size=vocab)) / "tokenizer.json" for vocab in (600, 700)]
    convert([text_corpus], tmp_path / "out", rank=0, world_size=2, tokenizer=TokenizerConfig(path=tokenizers[0]))
    with pytest.raises(DataioError, match="different tokenizers"):  # the last rank's merge
        convert([text_corpus], tmp_path / "out", rank=1, world_size=2, tokenizer=TokenizerConfig(path=tokenizers[1]))
    with pytest.raises(DataioError, match="different tokenizers"):
        merge_ranks(tmp_path / "out")
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_rank_waits_for_rank_0s_tokenizer_then_gives_up_with_one_line(text_corpus, tmp_path, capsys):
    code = main(["convert", "text", str(text_corpus), str(tmp_path / "out"), "--train-tokenizer", "bpe",
                 "--vocab-size", "600", "--rank", "1", "--world-size", "2", "--no-progress"]
                + ["--tokenizer-wait", "0"])
    assert code == 2 and "no tokenizer from rank 0" in capsys.readouterr().err


def test_a_rank_interrupted_mid_way_resumes_on_its_own(image_folder, one_process, tmp_path, monkeypatch):
    out = tmp_path / "out"
    _convert(image_folder[0], out, rank=0, world_size=2)
    interrupt_after(monkeypatch, 2)
    with pytest.raises(Interrupted):
        _convert(image_folder[0], out, rank=1, world_size=2)
    monkeypatch.undo()
    assert not (out / "manifest.json").exists()
    _convert(image_folder[0], out, rank=1, world_size=2)
    assert _images(out) == one_process[0] and verify(out).ok


def test_merge_of_something_that_is_not_a_folder_is_one_line(tmp_path, capsys):
    assert main(["merge", str(tmp_path / "missing")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def _rank_documents(out, world_size) -> list[int]:
    return [read_manifest(out / rank_folder(rank, world_size))[1].options["num_documents"]
            for rank in range(world_size)]


def _same_as_one_process(many, one) -> None:
    assert _token_rows(many) == _token_rows(one)
    merged, single = read_manifest(many)[1], read_manifest(one)[1]
    for key in ("num_documents", "num_tokens", "split_documents", "skipped", "length_histogram", "tokenizer"):
        assert merged.options[key] == single.options[key], key
    assert (many / "rejected.json").read_text() == (one / "rejected.json").read_text()  # FILE:LINE examples too
    assert verify(many, deep=True).ok


def test_two_near_equal_text_files_on_two_ranks_go_one_to_each(text_corpus, tmp_path):
    """Issue 23 case 11: the smaller file first, both went to rank 0 and rank 1 idled."""
    lines = text_corpus.read_text(encoding="utf-8").splitlines(keepends=True)
    sources = [tmp_path / "a.txt", tmp_path / "b.txt"]
    sources[0].write_text("".join(lines[:149]), encoding="utf-8")
    sources[1].write_text("".join(lines[149:]), encoding="utf-8")
    assert sources[0].stat().st_size < sources[1].stat().st_size
    one = convert(sources, tmp_path / "one", shard_tokens=4000)
    for rank in range(2):
        convert(sources, tmp_path / "two", shard_tokens=4000, rank=rank, world_size=2)
    assert min(_rank_documents(tmp_path / "two", 2)) > 100
    _same_as_one_process(tmp_path / "two", one)


@pytest.mark.parametrize("kind", ["line", "blank", "jsonl", "parquet"])
def test_one_text_file_is_split_inside_across_ranks(text_corpus, tmp_path, kind):
    """A single .txt (a document per line or per paragraph, with an empty one), .jsonl or .parquet (row
    groups of 40): three ranks each take a part, merged the same as one process, FILE:LINE examples too."""
    documents = text_corpus.read_text(encoding="utf-8").splitlines()
    documents[150] = documents[250] = ""
    if kind == "parquet":
        source = tmp_path / "corpus.parquet"
        pq.write_table(pa.table({"text": documents}), source, row_group_size=40)
    elif kind == "jsonl":
        source = tmp_path / "corpus.jsonl"
        source.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents), encoding="utf-8")
    else:
        source = tmp_path / "corpus.txt"
        source.write_text(("\n\n" if kind == "blank" else "\n").join(documents) + "\n", encoding="utf-8")
    options = {"doc_sep": "blank"} if kind == "blank" else {}
    one = convert([source], tmp_path / "one", shard_tokens=4000, **options)
    for rank in range(3):
        convert([source], tmp_path / "three", shard_tokens=4000, rank=rank, world_size=3, **options)
    counts = _rank_documents(tmp_path / "three", 3)
    assert min(counts) >= 60, counts  # ~100 each: no rank idles
    _same_as_one_process(tmp_path / "three", one)


def test_a_rank_of_a_split_text_file_resumes_on_its_own(text_corpus, tmp_path, monkeypatch):
    one = convert([text_corpus], tmp_path / "one", shard_tokens=1000)
    out = tmp_path / "two"
    convert([text_corpus], out, shard_tokens=1000, rank=0, world_size=2)
    interrupt_after(monkeypatch, 2)
    with pytest.raises(Interrupted):
        convert([text_corpus], out, shard_tokens=1000, rank=1, world_size=2)
    monkeypatch.undo()
    assert not (out / "manifest.json").exists()
    convert([text_corpus], out, shard_tokens=1000, rank=1, world_size=2)
    assert min(_rank_documents(out, 2)) > 100
    _same_as_one_process(out, one)
