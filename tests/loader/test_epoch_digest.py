"""An epoch that proves itself: the digest's arithmetic across world sizes (pure), and passes checked on 2 and 3
gloo ranks as users run them (torchrun): a sample read twice or never, a mixture's share off its plan, named on
every rank; a clean and a resumed pass proved."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dataio.sampling import epoch_digest, partition
from dataio.sampling.epoch_digest import Digest

HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


@pytest.mark.parametrize("world_size", range(1, 10))
def test_the_ranks_digests_add_up_to_the_planned_epochs_whatever_the_world(world_size):
    for total, consumed in ((0, 0), (7, 0), (45, 0), (45, 13), (100, 99)):
        order = partition.epoch_order(total, seed=3, epoch=1)
        shares = [partition.rank_share(total, world_size=world_size, rank=r, consumed=consumed, drop_last=False,
                                       pad=True) for r in range(world_size)]
        digests = [epoch_digest.digest_of(order[p][~rep]) for p, rep in shares]
        whole = epoch_digest.total([Digest.from_ints(d.as_ints()) for d in digests])  # as gathered
        assert whole == epoch_digest.digest_of(order[consumed:])
        assert all(0 <= v < 2**32 for d in digests for v in d.as_ints())


def test_a_duplicate_a_swap_or_a_missing_sample_changes_the_digest():
    ids = np.arange(1000)
    planned = epoch_digest.digest_of(ids)
    twice, swapped, missing = np.append(ids, 5), np.where(ids == 5, 1000, ids), ids[ids != 5]
    for read in (twice, swapped, missing, np.where(ids == 5, 6, np.where(ids == 6, 5, ids))):
        digest = epoch_digest.digest_of(read)
        assert (digest == planned) == (sorted(read.tolist()) == ids.tolist())
    halves = epoch_digest.digest_of(ids[:500]) + epoch_digest.digest_of(ids[500:])
    assert halves == planned
    sources = epoch_digest.digest_of(ids, ids % 3, 3)
    assert sources.sources == (334, 333, 333) and sources.as_dict()["sources"] == [334, 333, 333]


def test_the_second_look_names_the_samples_and_the_ranks():
    found = epoch_digest.differences([[0, 2, 4], [1, 3, 0]], [[0, 2, 4], [1, 3, 5]])
    assert found == ["sample 0 read 2 time(s) (ranks 0, 1), planned 1", "sample 5 never read (planned on rank 1)"]
    assert epoch_digest.differences([[0, 9]], [[0, 1]]) == ["sample 1 never read (planned on rank 0)",
                                                            "sample 9 read by rank(s) 0 but not in the plan"]


@pytest.mark.parametrize("world_size", [2, 3])
def test_a_pass_read_twice_or_never_or_off_its_mixture_share_is_named_on_every_rank(world_size, coloured_shards,
                                                                                   tmp_path):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(world_size),
               str(HERE / "digest_script.py"), str(coloured_shards), str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=HERE.parents[1], env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world_size)]
    last = world_size - 1
    for record in records:
        assert record["clean"]["ok"] and record["clean"]["samples"] == 45 and record["clean"]["ranks"] == world_size
        assert "46 samples read of 45 planned" in record["twice"]["error"]
        assert f"read 2 time(s) (ranks 0, {last}), planned 1" in record["twice"]["error"]
        assert "44 samples read of 45 planned" in record["never"]["error"]
        assert f"never read (planned on rank {last})" in record["never"]["error"]
        assert record["resumed"]["ok"] and record["resumed"]["samples"] == 45 - 2 * 4 * world_size
        assert "samples per source a: 71 read, 72 planned, b: 19 read, 18 planned" in record["mixture"]["error"]
        assert f"read by rank(s) {last} but not in the plan" in record["mixture"]["error"]
        assert all("\n" not in r.get("error", "") for r in record.values())


def test_a_sample_handed_out_twice_is_named_by_what_was_read_not_by_the_plan(coloured_shards):
    """A reading fault outside the plan (the plan right, a batch handed out with a sample twice) is named by its id:
    the second look compares the ids the rank handed out, not the ids its plan holds."""
    import dataio
    from dataio.loader.epoch_check import EpochMismatch

    loader = dataio.ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=1, seed=5)
    handed_out = type(loader)._digest_batch
    twice: list[int] = []

    def faulty(self, host):  # the first batch's first sample handed out once more
        handed_out(self, host)
        if not twice:
            twice.append(int(host.samples[0]))
            host.samples[1:] = host.samples[0]  # as a reader mixing up its rows would give them
            handed_out(self, host)

    loader._digest_batch = faulty.__get__(loader)
    for _ in loader:
        pass
    with pytest.raises(EpochMismatch, match=rf"sample {twice[0]} read [2-9] time"):
        dataio.check_epoch(loader)
