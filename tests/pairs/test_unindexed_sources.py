"""A folder of tars not indexed yet, and open_clip's ``DIR/{00000..00004}.tar``, as ``dataio train`` meets them: one
line naming ``dataio index DIR``; a pattern naming every shard of an indexed folder reads as that folder."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import dataio
from dataio.errors import ConfigError
from dataio.formats.dataset.manifest import ManifestError
from dataio.formats.dataset.shard_patterns import expand


def train(tmp_path: Path, train: Path, val: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "dataio", "train", "--task", "clip", "--train", str(train), "--val", val,
            "--model", "small_cnn", "--batch-size", "8", "--image-size", "32", "--epochs", "1",
            "--out", str(tmp_path / "run")]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=tmp_path)


@pytest.fixture
def unindexed(pair_tars, tmp_path) -> Path:
    folder = tmp_path / "val"
    folder.mkdir()
    for tar in sorted(pair_tars.glob("*.tar")):
        shutil.copy(tar, folder / tar.name)
    return folder


@pytest.mark.parametrize("pattern", [False, True], ids=["folder", "brace_pattern"])
def test_unindexed_tars_name_dataio_index_in_one_line(pair_tars, unindexed, tmp_path, pattern):
    val = f"{unindexed}/{{00000..00004}}.tar" if pattern else str(unindexed)
    done = train(tmp_path, pair_tars, val)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"no manifest: 5 .tar files not indexed yet; run `dataio index {unindexed}`" in lines[0]


def test_a_brace_pattern_of_an_indexed_folder_reads_the_folder_and_a_subset_is_refused(pair_tars):
    assert expand("{00000..00002}.tar") == ["00000.tar", "00001.tar", "00002.tar"]
    assert sorted(expand("{a,b}-{0..1}.tar")) == ["a-0.tar", "a-1.tar", "b-0.tar", "b-1.tar"]
    loader = dataio.PairLoader(f"{pair_tars}/{{00000..00004}}.tar", batch_size=8, image_size=32, train=False)
    assert loader.num_samples == 40
    with pytest.raises((ManifestError, ConfigError), match=r"names 3 of its 5 shards; give the folder"):
        dataio.PairLoader(f"{pair_tars}/{{00000..00002}}.tar", batch_size=8, image_size=32)
