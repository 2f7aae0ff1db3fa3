"""Issue 43 (items 1 and 9): the drop-in ``dataio.DataLoader`` follows torch's DataLoader on ranks; dataio's own
faces keep the process group's shares. Run as users run them: torchrun with 2 gloo ranks, exit code and stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from dataio.formats.errors import ConfigError
from dataio.sampling.rank_agreement import WAIT
from tests.once_per_run import once_per_run

HERE = Path(__file__).resolve().parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
LINE = "every rank of the 2 reads all 41 samples of the set; for a share per rank pass sampler=DistributedSampler"


@pytest.fixture(scope="module")
def ranks(forty_one, tmp_path_factory, worker_id) -> tuple[list[dict], str]:
    """The torchrun launch, once per run (``once_per_run``: this module's tests may land on both workers)."""
    def launch(out: Path) -> dict:
        done = subprocess.run(TORCHRUN + [str(HERE / "dropin_ranks_script.py"), str(forty_one), str(out)],
                              capture_output=True, text=True, timeout=240, cwd=out, env=ENV)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        return {"records": [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)], "stderr": done.stderr}
    result = once_per_run(tmp_path_factory, worker_id, "dropin_ranks", launch)
    return result["records"], result["stderr"]


def test_the_dropin_without_a_sampler_reads_the_whole_set_on_every_rank_saying_so_once(ranks):
    records, stderr = ranks
    for record in records:  # before: 21 and 20 samples (the process group's shares, with a repeat), unasked
        assert record["size"] == 41
        assert [sorted(p) for p in record["whole"]] == [list(range(41))] * 2
    # one line per loader read over 2 ranks without a sampler: the first loader on both ranks, the eval on rank 0
    assert stderr.count(LINE) == 3, stderr[-3000:]
    assert len([line for line in stderr.splitlines() if LINE in line]) == 3


def test_the_dropin_reads_a_distributed_samplers_shares_exactly(ranks):
    records, _ = ranks
    for record in records:  # the same indices as the sampler yields, and as torch's DataLoader over it
        assert [abs(i) if i >= 0 else None for i in record["sampler"]].count(None) <= 1
        read = [i if i >= 0 else 0 for i in record["sampler"]]  # DistributedSampler pads with the first index
        assert read == record["sampler_own"] == record["sampler_torch"]
    # Lightning's UnrepeatedDistributedSamplerWrapper (its predict sampler): each index once, 21 + 20, no padding
    assert [r["unrepeated"] for r in records] == [r["unrepeated_own"] for r in records]
    assert sorted(records[0]["unrepeated"] + records[1]["unrepeated"]) == list(range(41))


def test_an_evaluation_iterated_on_rank_0_alone_covers_the_set_without_waiting(ranks):
    records, _ = ranks  # open_clip's pattern: built on both ranks, iterated on rank 0, then a barrier
    assert sorted(records[0]["eval"]) == list(range(41))  # before: 21 of 41 (rank 0's share)
    assert records[0]["eval_seconds"] < WAIT  # no wait for rank 1's agreement, which never comes
    assert sorted(records[0]["one_rank"]) == list(range(41))  # ImageLoader(shard=False): the whole set, no wait


def test_the_native_face_keeps_the_process_groups_shares(ranks):
    records, _ = ranks
    native = [r["native"] for r in records]
    assert [len(n) for n in native] == [21, 21]  # every rank the same number of batches: one padding repeat
    assert Counter(i for n in native for i in n if i >= 0) == Counter(range(41))


def test_shard_false_refuses_a_world_or_a_sampler_in_one_line(forty_one):
    import dataio
    from torch.utils.data import DistributedSampler

    with pytest.raises(ConfigError, match="shard=False reads the whole set on this rank; it excludes world_size=2"):
        dataio.ImageLoader(forty_one, shard=False, world_size=2, rank=0)
    sampler = DistributedSampler(range(41), num_replicas=2, rank=0)
    with pytest.raises(ConfigError, match="shard=False reads the whole set on this rank; it excludes a sampler"):
        dataio.DataLoader(forty_one, shard=False, sampler=sampler)
    with pytest.raises(ConfigError, match="shard must be True, False or None"):
        dataio.ImageLoader(forty_one, shard="all")
