"""Issue 43 attack, loaders and ranks: the drop-in's rule (torch's semantics) against samplers that deal their own
indices, and against frameworks that never saw the loader. Run as users run them: torchrun, 2 gloo ranks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from torch.utils.data import DistributedSampler, WeightedRandomSampler

import dataio

HERE = Path(__file__).resolve().parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
OPTIONS = dict(batch_size=4, num_workers=1, image_size=16, normalize=False)


def ids(loader) -> list[int]:
    return [-1 if r else int(i) for b in loader.batches() for i, r in zip(b.samples, b.repeated, strict=True)]


def run_ranks(forty_one: Path, out: Path, mode: str) -> list[dict]:
    done = subprocess.run(TORCHRUN + [str(HERE / "ranks_frameworks_script.py"), str(forty_one), str(out), mode],
                          capture_output=True, text=True, timeout=240, cwd=out, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"))]


class ThreeIndices:
    """A user's sampler that says its world (num_replicas/rank) and yields its own indices, as torch reads them."""

    num_replicas, rank = 2, 0

    def __iter__(self):
        return iter([0, 1, 2])

    def __len__(self) -> int:
        return 3


def test_a_sampler_with_num_replicas_is_read_as_its_indices_not_as_a_share(forty_one):
    # docs/reliability.md: "any sampler with num_replicas/rank: each rank reads the sampler's indices exactly, the
    # same as torch's DataLoader over that sampler". Now: 21 samples (an even share of 41), never [0, 1, 2].
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            got = ids(dataio.DataLoader(forty_one, sampler=ThreeIndices(), **OPTIONS))
        except dataio.ConfigError:
            return  # a one-line refusal of a sampler whose indices dataio does not read is also right
    assert sorted(got) == [0, 1, 2], got


def test_lightnings_distributed_sampler_wrapper_keeps_the_wrapped_samplers_weights(forty_one):
    # Lightning's DistributedSamplerWrapper (a DistributedSampler subclass) over a WeightedRandomSampler that only
    # draws images 0..4: torch's DataLoader reads only those. Now dataio reads the even indices 0..40: the weights
    # are dropped without a word.
    from lightning.fabric.utilities.distributed import DistributedSamplerWrapper

    weighted = WeightedRandomSampler([1.0] * 5 + [0.0] * 36, num_samples=41)
    sampler = DistributedSamplerWrapper(weighted, num_replicas=2, rank=0, shuffle=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            got = ids(dataio.DataLoader(forty_one, sampler=sampler, **OPTIONS))
        except dataio.ConfigError:
            return  # refusing a sampler that draws its own indices, in one line, is also right
    assert set(got) <= set(range(5)), sorted(set(got))


def test_control_an_unshuffled_drop_last_distributed_sampler_is_read_exactly(forty_one):
    sampler = DistributedSampler(range(41), num_replicas=2, rank=0, shuffle=False, drop_last=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ids(dataio.DataLoader(forty_one, sampler=sampler, **OPTIONS)) == list(sampler)


def test_an_unprepared_dropin_under_accelerate_reads_the_whole_set_on_rank_0(forty_one, tmp_path):
    # An Accelerate script evaluating on the main process with a loader it never passed to prepare(): torch's
    # DataLoader reads all 41. Now the drop-in sees a live Accelerator and reads rank 0's padded share (21).
    (record,) = run_ranks(forty_one, tmp_path, "accelerate")
    assert sorted(record["eval"]) == list(range(41)), sorted(record["eval"])
    # each whole-set note names the constructor the user called (ImageLoader(shard=None) was called dataio.DataLoader)
    assert sorted(note.split("(", 1)[0] for note in record["notes"]) == ["ImageLoader", "dataio.DataLoader"], record
    assert all(f"{face} follows torch's DataLoader" in note for note, face in zip(
        sorted(record["notes"]), ["ImageLoader(shard=None)", "dataio.DataLoader"], strict=True)), record["notes"]


def test_a_dropin_lightning_was_never_given_reads_the_whole_set_in_a_rank_0_hook(forty_one, tmp_path):
    # A LightningModule's own zero-shot loader (built in __init__, iterated in on_train_epoch_end on rank 0, never
    # returned by a *_dataloader hook): Lightning injects no sampler into it, torch's loader reads all 41. Now the
    # Lightning loop on the calling stack makes the drop-in read rank 0's share: 21 of 41, no word.
    (record,) = run_ranks(forty_one, tmp_path, "lightning")
    assert sorted(record["eval"]) == list(range(41)), sorted(record["eval"])


def test_shard_false_on_one_rank_and_a_share_on_the_other_is_named(forty_one, tmp_path):
    # One ImageLoader site, rank 0 shard=False (the whole set), rank 1 the default share of 2: rank 1 reads half,
    # rank 0 all, so half the set is read twice per epoch. Now: rank 1 waits the agreement's 5 s, then reads on, no
    # word. It should be refused like any other pair of ranks whose shares overlap (RanksDisagree naming shard).
    records = run_ranks(forty_one, tmp_path, "mixed_shard")
    assert "error" in records[1] and "shard" in records[1]["error"], records[1]
