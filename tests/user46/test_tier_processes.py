"""Issue 46's scripts, run unchanged as an AVX2-only EPYC's user would (``use_tier("avx2")`` under ``__main__``):
spawn and forkserver DataLoader workers over a ``ShardDataset`` run the cap and give the default tier's batches;
``torch.multiprocessing.spawn`` ranks handed a built ``ImageLoader`` and ``dataio.DataLoader`` run the cap, with the
default tier's batches and losses, and the ``dataio.DataLoader`` rebuilt there is still called that in its notes
(it was called ``ImageLoader(shard=None)``, a constructor the script never called: the rebuild lost its name)."""

from __future__ import annotations

import re
import subprocess

import pytest

from .conftest import SCRIPTS, free_port, ok, run


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_dataloader_workers_run_the_cap_and_give_the_default_tiers_batches(capped, image_shards, tmp_path, context):
    default = ok(run([SCRIPTS / "dl_workers.py", image_shards, context, "default"], tmp_path)).stdout
    avx2 = ok(run([SCRIPTS / "dl_workers.py", image_shards, context, "avx2"], tmp_path)).stdout
    workers = sorted(re.findall(r"worker (\d) tier (scalar|avx512|avx2|vbmi)\b", avx2))
    assert workers == [("0", capped), ("1", capped)], avx2
    assert "tier avx2" not in default, default
    digests = [re.search(r"parent tier \w+ digest (\w+)", out)[1] for out in (default, avx2)]
    assert digests[0] == digests[1]


@pytest.fixture(scope="module")
def spawn_runs(capped, image_shards, tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """``spawn_ranks.py`` at the CPU's tier and capped at avx2, run once for the tests below."""
    cwd = tmp_path_factory.mktemp("spawn_ranks")
    return {tier: ok(run([SCRIPTS / "spawn_ranks.py", image_shards, tier, free_port()], cwd, timeout=150))
            for tier in ("default", "avx2")}


def test_spawned_ranks_run_the_cap_of_the_loaders_they_receive(capped, spawn_runs):
    outs = spawn_runs
    capped_out = outs["avx2"].stdout
    assert sorted(re.findall(r"rank (\d) (start|end) tier (scalar|avx512|avx2|vbmi)\b", capped_out)) == [
        ("0", "end", capped), ("0", "start", capped), ("1", "end", capped), ("1", "start", capped)], capped_out
    ends = {tier: sorted(re.findall(r"rank (\d) end tier \w+ digest (\w+) loss (\S+)", done.stdout))
            for tier, done in outs.items()}
    assert len(ends["default"]) == 2 and ends["avx2"] == ends["default"]  # same batches and losses per rank


def test_a_dataio_dataloader_rebuilt_in_a_spawned_rank_keeps_its_name(spawn_runs):
    """The whole-set note of the ``dataio.DataLoader`` each rank unpickles names the constructor the script called."""
    done = spawn_runs["avx2"]
    notes = [line for line in done.stderr.splitlines() if "follows torch's DataLoader" in line]
    assert len(notes) == 2, done.stderr
    assert all("dataio.DataLoader follows torch's DataLoader" in line for line in notes), notes
    assert "ImageLoader(shard=None)" not in done.stderr
    unexpected = [line for line in done.stderr.splitlines() if line.strip() and line not in notes]
    assert not unexpected, unexpected  # no warning, no traceback
