"""Image-text pairs packed and adopted: img2dataset tars indexed in place, caption folders and Hub Parquet
converted, every bad pair one line naming it, captions and token ids in the sample table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.pairs.pair_fields import holds_pairs
from dataio.formats.dataset.sample_fields import holds_labels
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.formats.dataset.verify import verify
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.pairs.synthetic_pair_writers import write_caption_folder, write_hub_parquet, write_img2dataset
from dataio.formats.pairs.synthetic_pairs import BAD_PAIRS, SyntheticPairsConfig, make_pair
from dataio.formats.text.tokenizer_setup import TokenizerConfig, train_bpe
from tests.formats.journal_stop import Interrupted, interrupt_after

ROOT = Path(__file__).resolve().parents[2]
# what becomes of each bad pair: its line's reason (None: packed, and met at read time)
INDEX_REASONS = {"caption_not_utf8": "caption is not UTF-8 (byte 0xe9 at", "empty_caption": "empty caption",
                 "missing_caption": "lacks a .txt caption", "huge_caption": "caption of 1,048,576 bytes is longer",
                 "json_not_json": ".json is not JSON (JSONDecodeError", "missing_image": "lacks an image member",
                 "truncated_image": None}
CONVERT_REASONS = {**INDEX_REASONS, "missing_caption": "no caption", "missing_image": "",
                   "truncated_image": "cannot decode: OSError: image file is truncated"}


def run_cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dataio", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "DATAIO_NUM_WORKERS": "2"})


def table_of(folder: Path):
    manifest = read_manifest(folder)[1]
    return manifest, read_sample_table(folder / manifest.sample_table, declared=manifest.table_columns()).table


def decoded(folder: Path, ids: list[int]) -> str:
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    return tokenizer.decode(ids[1:-1])  # BOS ... EOS


def test_index_adopts_img2dataset_tars_and_lists_each_bad_pair(tmp_path):
    config = SyntheticPairsConfig(count=40, samples_per_shard=10, failed_fraction=0.1, bad_pairs=BAD_PAIRS)
    written = write_img2dataset(tmp_path / "tars", config)
    done = run_cli("index", "tars", "--no-progress", "--train-tokenizer", "bpe", "--vocab-size", "320", cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    kept = {key for key, kind in written.bad.items() if INDEX_REASONS[kind] in (None, INDEX_REASONS["json_not_json"])}
    assert done.stdout.startswith(f"indexed {len(written.captions) + len(kept)} image-text pairs in 4 tars")
    lines = [json.loads(line) for line in (tmp_path / "tars" / "rejected.jsonl").read_text().splitlines()]
    for key, kind in written.bad.items():  # one line each, naming the tar and the sample
        named = [line for line in lines if line["path"].split("/")[1].split(".")[0] == key]
        expected = INDEX_REASONS[kind]
        assert len(named) == (expected is not None), (kind, named)
        if expected:
            assert named[0]["reason"].startswith(expected) and named[0]["path"].startswith(f"{int(key) // 10:05d}.tar/")
    assert len(lines) == 6
    manifest, table = table_of(tmp_path / "tars")
    assert holds_pairs(manifest.sample_fields()) and not holds_labels(manifest.sample_fields()) and not manifest.classes
    rows = dict(zip(table.column("key").to_pylist(), table.to_pylist(), strict=True))
    assert set(rows) == set(written.captions) | kept  # nothing else lost: no failed download, no other bad pair
    for key, caption in written.captions.items():
        row = rows[key]
        assert row["caption"] == caption and "label" not in row and decoded(tmp_path / "tars", row["input_ids"]) == caption
        with open(tmp_path / "tars" / f"{int(key) // 10:05d}.tar", "rb") as tar:
            meta = json.loads(os.pread(tar.fileno(), row["json_size"], row["json_offset"]))
        assert meta["key"] == key and meta["caption"] == caption and meta["status"] == "success"
    not_json = next(key for key, kind in written.bad.items() if kind == "json_not_json")
    assert rows[not_json]["json_offset"] == -1 and rows[not_json]["caption"]  # kept, without its metadata
    assert verify(tmp_path / "tars").ok
    assert [p for p in verify(tmp_path / "tars", deep=True).problems] == [
        f"sample {next(k for k, v in written.bad.items() if v == 'truncated_image')!r} in shard 00003.tar: cannot "
        "decode (OSError: image file is truncated (23 bytes not processed))"]


@pytest.mark.parametrize("layout", ["folder", "parquet"])
def test_convert_lists_each_bad_pair_and_packs_the_rest(tmp_path, layout):
    if layout == "folder":
        bad = tuple(k for k in BAD_PAIRS if k != "json_not_json")
        written = write_caption_folder(tmp_path / "src", SyntheticPairsConfig(count=30, bad_pairs=bad))
        flags = ["--captions"]
    else:
        bad = tuple(k for k in BAD_PAIRS if k not in ("json_not_json", "caption_not_utf8"))
        written = write_hub_parquet(tmp_path / "src", SyntheticPairsConfig(count=30, samples_per_shard=8, bad_pairs=bad))
        flags = ["--caption-column", "caption"]
    done = run_cli("convert", "images", "src", "out", "--no-progress", *flags, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == len(bad) and all(line.startswith("rejected ") for line in lines), lines
    for key, kind in written.bad.items():
        name = key if layout == "folder" else key.replace(":", "#")
        named = [line for line in lines if f"{name}." in line or f"{name}:" in line]
        assert len(named) == 1 and CONVERT_REASONS[kind] in named[0], (kind, named)
    _, table = table_of(tmp_path / "out")
    assert sorted(table.column("caption").to_pylist()) == sorted(written.captions.values())
    strict = run_cli("convert", "images", "src", "strict", "--no-progress", "--strict", *flags, cwd=tmp_path)
    assert strict.returncode == 1


@pytest.fixture(scope="module")
def pair_tokenizer(tmp_path_factory) -> Path:
    config = SyntheticPairsConfig(count=60)
    path = tmp_path_factory.mktemp("tokenizer") / "captions.json"
    train_bpe([make_pair(i, config).caption for i in range(60)], TokenizerConfig(train="bpe", vocab_size=300)).save(str(path))
    return path


def test_a_caption_folder_and_hub_parquet_pack_the_same_pairs_with_restart_markers_and_ids(tmp_path, pair_tokenizer):
    config = SyntheticPairsConfig(count=24, samples_per_shard=10)
    write_caption_folder(tmp_path / "folder", config)
    written = write_hub_parquet(tmp_path / "hub", config)
    tokenizer = TokenizerConfig(path=pair_tokenizer)
    outs = {}
    for name in ("folder", "hub"):
        outs[name] = tmp_path / f"{name}-out"
        convert_images(ConvertImagesConfig(src=tmp_path / name, out=outs[name], captions=True, tokenizer=tokenizer,
                                           num_workers=2, progress=False, max_shard_samples=10))
        report = verify(outs[name], deep=True)
        assert report.ok and report.samples_checked == 24, report.problems
    (manifest, folder), (_, hub) = table_of(outs["folder"]), table_of(outs["hub"])
    assert manifest.options["restart_interval"] == 2 and manifest.options["tokenizer"]["vocab_size"] == 300
    assert [f.name for f in manifest.fields] == ["image", "caption", "json", "input_ids"]
    assert folder.column("caption").to_pylist() == hub.column("caption").to_pylist() == list(written.captions.values())
    assert folder.column("input_ids").to_pylist() == hub.column("input_ids").to_pylist()
    assert folder.column("xxh3").to_pylist() == hub.column("xxh3").to_pylist()  # the same pictures, byte for byte
    ids = folder.column("input_ids").to_pylist()
    assert all(decoded(outs["folder"], row) == caption
               for row, caption in zip(ids, written.captions.values(), strict=True))
    assert (outs["folder"] / "tokenizer.json").read_bytes() == (outs["hub"] / "tokenizer.json").read_bytes()


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_an_interrupted_pair_conversion_resumes_to_the_same_bytes_and_ranks_merge_to_them(tmp_path, monkeypatch):
    write_caption_folder(tmp_path / "src", SyntheticPairsConfig(count=20, bad_pairs=("empty_caption",)))
    common = dict(src=tmp_path / "src", captions=True, tokenizer=TokenizerConfig(train="bpe", vocab_size=280),
                  num_workers=1, progress=False, max_shard_samples=3)
    convert_images(ConvertImagesConfig(out=tmp_path / "whole", **common))
    interrupt_after(monkeypatch, 3)
    with pytest.raises(Interrupted):
        convert_images(ConvertImagesConfig(out=tmp_path / "cut", **common))
    monkeypatch.undo()
    convert_images(ConvertImagesConfig(out=tmp_path / "cut", **common))
    assert files_of(tmp_path / "cut") == files_of(tmp_path / "whole")
    ranked = {**common, "tokenizer": TokenizerConfig(path=tmp_path / "whole" / "tokenizer.json")}
    for rank in range(2):
        convert_images(ConvertImagesConfig(out=tmp_path / "ranks", rank=rank, world_size=2, **ranked))
    (_, whole), (merged_manifest, merged) = table_of(tmp_path / "whole"), table_of(tmp_path / "ranks")
    for column in ("caption", "input_ids", "xxh3", "path"):
        assert merged.column(column).to_pylist() == whole.column(column).to_pylist(), column
    assert (tmp_path / "ranks" / "tokenizer.json").read_bytes() == (tmp_path / "whole" / "tokenizer.json").read_bytes()
    assert verify(tmp_path / "ranks", deep=True).ok and holds_pairs(merged_manifest.sample_fields())
    assert np.all(np.asarray(merged.column("json_offset")) > 0)


def test_a_tokenizer_trained_on_each_rank_is_refused_and_so_is_one_without_captions(tmp_path):
    (tmp_path / "src").mkdir()
    done = run_cli("convert", "images", "src", "out", "--captions", "--train-tokenizer", "bpe", "--world-size", "2",
                   "--rank", "0", cwd=tmp_path)
    assert done.returncode == 2 and "give every rank one tokenizer file" in done.stderr and done.stderr.count("\n") == 1
    done = run_cli("convert", "images", "src", "out", "--train-tokenizer", "bpe", cwd=tmp_path)
    assert done.returncode == 2 and "--captions" in done.stderr and done.stderr.count("\n") == 1
