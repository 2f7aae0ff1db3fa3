"""Text batch plans as pure functions: equal batches per rank, exactly once, budget, packing."""

from __future__ import annotations

import numpy as np
import pytest

from dataio.text import batch_plans as plans


def lengths_of(n: int, seed: int = 0) -> np.ndarray:
    return np.maximum(1, np.random.default_rng(seed).lognormal(4, 1, n).astype(np.int64)).clip(max=500)


def global_plan(mode: str, lengths: np.ndarray, seed: int = 0, epoch: int = 0, drop_last: bool = False):
    rng = plans.epoch_rng(seed, epoch)
    if mode == "fixed":
        return plans.fixed_plan(len(lengths), 16, rng=rng, drop_last=drop_last)
    if mode == "bucket":
        return plans.bucket_plan(lengths, 16, window=128, rng=rng, drop_last=drop_last)
    return plans.budget_plan(lengths, 2048, window=128, pad_multiple=8, rng=rng)


@pytest.mark.parametrize("mode", ["fixed", "bucket", "budget"])
@pytest.mark.parametrize("n", [1, 7, 333, 1000])
def test_every_rank_gets_the_same_number_of_batches_and_every_sample_once(mode, n):
    lengths = lengths_of(n)
    full = global_plan(mode, lengths)
    assert sorted(full.samples.tolist()) == list(range(n))
    for world_size in list(range(1, 9)) + [16, 64]:
        if world_size > len(full):
            with pytest.raises(ValueError, match="no data"):
                plans.deal(full, world_size=world_size, rank=0, drop_last=True)
        dealt = [plans.deal(full, world_size=world_size, rank=r, drop_last=False) for r in range(world_size)]
        assert len({len(d) for d in dealt}) == 1
        seen = np.concatenate([d.samples[np.repeat(~d.repeated, d.sizes())] for d in dealt])
        assert sorted(seen.tolist()) == list(range(n))  # repeats are flagged; the rest is exactly once
        if len(full) >= world_size:
            dropped = [plans.deal(full, world_size=world_size, rank=r, drop_last=True) for r in range(world_size)]
            assert len({len(d) for d in dropped}) == 1 and not any(d.repeated.any() for d in dropped)


def test_token_budget_is_never_exceeded_and_batches_vary():
    lengths = lengths_of(2000, seed=3)
    plan = plans.budget_plan(lengths, 4096, window=512, pad_multiple=8, rng=plans.epoch_rng(1, 0))
    for b in range(len(plan)):
        rows = plan.batch(b)
        assert len(rows) * plans.round_up(int(lengths[rows].max()), 8) <= 4096
    assert plan.sizes().max() > 4 * plan.sizes().min()
    with pytest.raises(ValueError, match="max_tokens"):
        plans.budget_plan(lengths, 64, window=512, pad_multiple=8, rng=None)


def test_bucketing_groups_similar_lengths():
    lengths = lengths_of(4000, seed=4)
    rng = plans.epoch_rng(0, 0)

    def padding(plan):
        total = sum(len(plan.batch(b)) * lengths[plan.batch(b)].max() for b in range(len(plan)))
        return 1 - lengths.sum() / total

    assert padding(plans.bucket_plan(lengths, 32, window=2048, rng=rng, drop_last=False)) < 0.05
    assert padding(plans.fixed_plan(len(lengths), 32, rng=rng, drop_last=False)) > 0.4


def test_plans_are_deterministic_per_seed_and_epoch():
    lengths = lengths_of(500)
    for mode in ("fixed", "bucket", "budget"):
        a, b = global_plan(mode, lengths, seed=1, epoch=2), global_plan(mode, lengths, seed=1, epoch=2)
        assert np.array_equal(a.samples, b.samples) and np.array_equal(a.offsets, b.offsets)
        assert not np.array_equal(a.samples, global_plan(mode, lengths, seed=1, epoch=3).samples)


@pytest.mark.parametrize("world_size", [1, 2, 3, 5, 8])
def test_packing_covers_every_token_once(world_size):
    lengths = lengths_of(300, seed=5)
    total = int(lengths.sum())
    covered = np.zeros(total, dtype=np.int64)
    counts = set()
    for rank in range(world_size):
        stream, full = plans.pack_plan(lengths, block_size=256, batch_size=4, rng=plans.epoch_rng(0, 0),
                                       drop_last=False)
        plan = plans.deal(full, world_size=world_size, rank=rank, drop_last=False)
        counts.add(len(plan))
        for b in range(len(plan)):
            if plan.repeated[b]:
                continue
            for start in plan.batch(b).tolist():
                for sample, lo, hi in stream.segments(start):
                    position = int(np.flatnonzero(stream.order == sample)[0])
                    first = int(stream.stream_offsets[position]) + lo
                    covered[first:first + hi - lo] += 1
                    assert 0 <= lo < hi <= lengths[sample]
    assert len(counts) == 1
    assert (covered == 1).all()
