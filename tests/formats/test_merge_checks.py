"""``dataio merge`` publishes only a complete dataset (issue 25 §4): a rank's files that vanished or changed
after it finished are named in one line, and no OUT/manifest.json is written."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.dataset.manifest import read_manifest


@pytest.fixture
def ranks(image_folder, tmp_path):
    """Two ranks of a conversion, finished and merged automatically; the merged manifest then removed."""
    out = tmp_path / "out"
    for rank in range(2):
        convert_images(ConvertImagesConfig(src=image_folder[0], out=out, shard_size="200KB", num_workers=1,
                                           progress=False, rank=rank, world_size=2))
    (out / "manifest.json").unlink()
    return out


def _merge(out, *flags):
    return subprocess.run([sys.executable, "-m", "dataio", "merge", str(out), *flags], capture_output=True,
                          text=True, timeout=120)


def test_merge_of_complete_ranks_publishes(ranks):
    done = _merge(ranks)
    assert done.returncode == 0, done.stderr
    assert read_manifest(ranks)[1].num_samples > 0


@pytest.mark.parametrize("damage", ["delete_shard", "truncate_shard", "delete_index", "delete_table"])
def test_merge_refuses_a_rank_changed_after_it_finished(ranks, damage):
    rank1 = ranks / "rank-00001-of-00002"
    _, part = read_manifest(rank1)
    shard = rank1 / part.shards[-1].file
    if damage == "delete_shard":
        shard.unlink()
    elif damage == "truncate_shard":
        shard.write_bytes(shard.read_bytes()[:-512])
    elif damage == "delete_index":
        (rank1 / part.shards[0].index).unlink()
    else:
        (rank1 / part.sample_table).unlink()
    done = _merge(ranks)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "rank(s) 1" in lines[0] and "rank-00001-of-00002/" in lines[0]
    assert not (ranks / "manifest.json").exists()


def test_merge_verify_finds_a_changed_byte(ranks):
    rank0 = ranks / "rank-00000-of-00002"
    _, part = read_manifest(rank0)
    shard = rank0 / part.shards[0].file
    data = bytearray(shard.read_bytes())
    data[700] ^= 0xFF  # same size: only the sha256 tells
    shard.write_bytes(bytes(data))
    assert _merge(ranks).returncode == 0  # sizes only, by default
    (ranks / "manifest.json").unlink()
    done = _merge(ranks, "--verify")
    assert done.returncode == 1 and "sha256" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (ranks / "manifest.json").exists()
