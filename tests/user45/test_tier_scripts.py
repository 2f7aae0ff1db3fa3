"""Issue 45 in users' own scripts, as an AVX2-only EPYC would run them: a timm-style loop run unchanged under
``use_tier("avx2")`` gives the default tier's batches and losses; a plain torchrun script's ranks do not read
DATAIO_CPU_TIER (only the `dataio` command does: now said in docs/read.md, CPU tiers) and follow a top-level
``use_tier``; a spawned DataLoader worker starts at the CPU's highest unless the script caps it at its top level."""

from __future__ import annotations

import json
import re

from .conftest import SCRIPTS, ok, run

TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def test_timm_loop_under_use_tier_avx2_gives_the_default_tiers_batches(cpu_highest, image_shards, timm_env,
                                                                        tmp_path):
    done = ok(run([SCRIPTS / "with_tier.py", "default,avx2", SCRIPTS / "timm_loop.py", image_shards,
                   tmp_path / "{tier}.json"], tmp_path, env=timm_env))
    assert "with_tier: avx2: ran avx2" in done.stderr or "with_tier: avx2: ran scalar" in done.stderr
    default, avx2 = (json.loads((tmp_path / name).read_text()) for name in ("default.json", "avx2.json"))
    assert len(default["digests"]) == 4
    assert avx2 == default


def test_torchrun_ranks_ignore_the_variable_and_follow_use_tier(cpu_highest, image_shards, tmp_path):
    done = ok(run([*TORCHRUN, SCRIPTS / "ddp_tier.py", image_shards], tmp_path, env={"DATAIO_CPU_TIER": "avx2"}))
    ranks = re.findall(r"rank (\d) (start|use_tier) tier (\w+) digest (\w+)", done.stdout)
    assert len(ranks) == 4, done.stdout
    expected = "avx2" if cpu_highest in ("avx2", "avx512", "vbmi") else cpu_highest
    tiers = {(rank, when): tier for rank, when, tier, _ in ranks}
    assert tiers == {("0", "start"): cpu_highest, ("1", "start"): cpu_highest,  # the variable: not read
                     ("0", "use_tier"): expected, ("1", "use_tier"): expected}
    digests = {(rank, when): digest for rank, when, _, digest in ranks}
    assert digests[("0", "start")] == digests[("0", "use_tier")] != digests[("1", "start")] \
        == digests[("1", "use_tier")]  # each rank its own share, the same pixels on both tiers


def test_a_spawned_worker_takes_the_tier_the_data_set_carries(cpu_highest, image_shards, tmp_path):
    """A spawned worker imports the script afresh (the CPU's highest tier), then unpickles the ShardDataset, which
    carries its parent's cap: with ``use_tier`` under ``__main__`` only as at the top level."""
    expected = "avx2" if cpu_highest in ("avx2", "avx512", "vbmi") else cpu_highest
    out = ok(run([SCRIPTS / "spawn_workers.py", image_shards], tmp_path)).stdout
    assert f"main: worker tier {expected}" in out, out
    assert f"top: worker tier {expected}" in out, out
    assert f"parent tier {expected}" in out, out
