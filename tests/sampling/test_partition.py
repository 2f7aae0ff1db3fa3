"""The partition as pure functions, over world sizes 1 to 64, uneven shards, resumes; no processes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dataio.sampling.partition import (
    batch_bounds, check_world, consumed_after, epoch_order, random_same_shard_rate, rank_share, same_shard_rate,
)


def uneven_shards(num_samples: int, seed: int = 0) -> np.ndarray:
    """Shard ids of ``num_samples`` samples in shards of random, uneven sizes (1 to 40)."""
    sizes = np.random.default_rng(seed).integers(1, 41, size=num_samples)
    return np.repeat(np.arange(num_samples), sizes)[:num_samples]


def rank_batches(num_samples, world_size, rank, *, seed, epoch, batch_size, drop_last, sample_shards=None,
                 consumed=0) -> list[tuple[np.ndarray, np.ndarray]]:
    """(samples, repeated) per batch of one rank, composed as the loaders compose the pure functions."""
    check_world(num_samples, world_size, drop_last=drop_last, multiple=batch_size)
    order = epoch_order(num_samples if sample_shards is None else sample_shards, seed=seed, epoch=epoch)
    positions, repeated = rank_share(num_samples, world_size=world_size, rank=rank, consumed=consumed,
                                     drop_last=drop_last, multiple=batch_size)
    samples = order[positions]
    return [(samples[lo:hi], repeated[lo:hi]) for lo, hi in batch_bounds(len(samples), batch_size)]


@pytest.mark.parametrize("num_samples", [1, 7, 64, 257, 1001])
@pytest.mark.parametrize("drop_last", [False, True])
def test_every_world_size_gets_equal_batches_and_covers_the_data(num_samples, drop_last):
    shards = uneven_shards(num_samples)
    for world_size in range(1, 65):
        options = dict(seed=5, epoch=1, batch_size=4, drop_last=drop_last, sample_shards=shards)
        if drop_last and num_samples < world_size * 4:
            with pytest.raises(ValueError, match="no data"):
                rank_batches(num_samples, world_size, 0, **options)
            continue
        ranks = [rank_batches(num_samples, world_size, r, **options) for r in range(world_size)]
        assert len({len(batches) for batches in ranks}) == 1, f"unequal batch counts at world size {world_size}"
        real = np.concatenate([s[~rep] for batches in ranks for s, rep in batches] or [np.zeros(0, int)])
        padding = sum(int(rep.sum()) for batches in ranks for _, rep in batches)
        assert len(np.unique(real)) == len(real), "a sample is read twice"
        if drop_last:
            assert padding == 0 and len(real) == num_samples // (world_size * 4) * world_size * 4
            assert all(len(s) == 4 for batches in ranks for s, _ in batches)
        else:
            assert sorted(real.tolist()) == list(range(num_samples))
            assert padding < world_size
            assert all((~rep).any() for batches in ranks for _, rep in batches[:-1]), "only the last batch pads"


def test_order_is_a_permutation_that_depends_on_seed_and_epoch_only():
    shards = uneven_shards(500)
    a = epoch_order(shards, seed=1, epoch=2, window=64)
    assert np.array_equal(a, epoch_order(shards, seed=1, epoch=2, window=64))
    assert not np.array_equal(a, epoch_order(shards, seed=1, epoch=3, window=64))
    assert not np.array_equal(a, epoch_order(shards, seed=2, epoch=2, window=64))
    assert sorted(a.tolist()) == list(range(500))
    assert np.array_equal(epoch_order(shards, seed=1, epoch=2, shuffle=False), np.arange(500))
    scattered = np.random.default_rng(0).permutation(shards)  # shard ids need not be contiguous
    assert sorted(epoch_order(scattered, seed=0, epoch=0).tolist()) == list(range(500))


def test_more_ranks_than_shards():
    shards = np.repeat([0, 1], [30, 3])
    ranks = [rank_batches(33, 16, r, seed=0, epoch=0, batch_size=2, drop_last=False, sample_shards=shards)
             for r in range(16)]
    assert {len(b) for b in ranks} == {2}
    assert sorted(s for b in ranks for x, rep in b for s in x[~rep].tolist()) == list(range(33))


def play(total: int, world_size: int, consumed: int, steps: int | None, drop_last: bool = False) -> tuple[list[int], int]:
    """Every rank reads ``steps`` positions (all, if None) from ``consumed``; returns them and the new consumed."""
    shares = [rank_share(total, world_size=world_size, rank=r, consumed=consumed, drop_last=drop_last)
              for r in range(world_size)]
    steps = len(shares[0][0]) if steps is None else min(steps, len(shares[0][0]))
    read = [int(p) for positions, repeated in shares for p in positions[:steps][~repeated[:steps]]]
    return read, consumed_after(total, world_size=world_size, consumed=consumed, per_rank_done=steps)


@pytest.mark.parametrize("total", [10, 97, 256])
def test_elastic_resume_reads_each_position_once(total):
    """W1 ranks read k positions each, then W2 ranks (any other world size) read the rest: each once."""
    for w1, w2 in itertools.product([1, 2, 3, 4, 8], [1, 2, 3, 5, 8]):
        for k in (0, 1, 3, total // w1):
            first, consumed = play(total, w1, 0, k)
            assert sorted(first) == list(range(consumed)), "the consumed positions must be a prefix"
            rest, end = play(total, w2, consumed, None)
            assert sorted(first + rest) == list(range(total)) and end == total, (w1, w2, k)


def test_chained_resumes_across_three_world_sizes():
    consumed, seen = 0, []
    for world_size, steps in [(4, 5), (2, 7), (3, 4), (6, None)]:
        read, consumed = play(300, world_size, consumed, steps)
        seen += read
    assert sorted(seen) == list(range(300))


def test_same_world_resume_continues_the_uninterrupted_sequence():
    for world_size, k in [(1, 5), (2, 3), (4, 10), (8, 1)]:
        consumed = consumed_after(203, world_size=world_size, consumed=0, per_rank_done=k)
        for rank in range(world_size):
            full, _ = rank_share(203, world_size=world_size, rank=rank, drop_last=False)
            rest, _ = rank_share(203, world_size=world_size, rank=rank, consumed=consumed, drop_last=False)
            assert np.array_equal(rest, full[k:])


def test_consumed_must_be_in_the_epoch():
    with pytest.raises(ValueError, match="consumed"):
        rank_share(10, world_size=2, rank=0, consumed=11, drop_last=False)
    positions, repeated = rank_share(10, world_size=2, rank=1, consumed=10, drop_last=False)
    assert len(positions) == len(repeated) == 0  # resumed at the very end: nothing left, no hang


def test_two_level_shuffle_mixes_shards_within_batches():
    """ImageNet-like layout: 1024 shards of ~1250 samples. Report in bench/results via `dataio bench sampler`."""
    shards = np.repeat(np.arange(1024), 1251)[:1_281_167]
    batches = lambda order: [order[i:i + 256] for i in range(0, 256 * 200, 256)]  # noqa: E731
    mixed = same_shard_rate(batches(epoch_order(shards, seed=0, epoch=0)), shards)
    unwindowed = same_shard_rate(batches(epoch_order(shards, seed=0, epoch=0, window=1)), shards)
    assert unwindowed > 0.99  # shard order alone: a batch is one shard
    assert mixed < 0.03  # 65536-sample windows span ~52 shards
    assert random_same_shard_rate(shards) < mixed


def test_batch_bounds():
    assert batch_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert batch_bounds(10, 4, True) == [(0, 4), (4, 8)]


@pytest.mark.parametrize("total, consumed", [(1, 0), (37, 0), (100, 13), (257, 64), (64, 64)])
@pytest.mark.parametrize("drop_tail", [False, True])
def test_runs_of_a_batch_keep_counts_prefixes_and_contiguous_batches(total, consumed, drop_tail):
    """``block``: the same counts as single positions, every batch a contiguous span, prefixes at whole runs."""
    for world_size, block in itertools.product((1, 2, 3, 8), (1, 4, 7)):
        shares = [rank_share(total, world_size=world_size, rank=r, consumed=consumed, drop_last=False,
                             drop_tail=drop_tail, block=block) for r in range(world_size)]
        plain = rank_share(total, world_size=world_size, rank=0, consumed=consumed, drop_last=False,
                           drop_tail=drop_tail)
        assert {len(p) for p, _ in shares} == {len(plain[0])}
        read = np.concatenate([p[~rep] for p, rep in shares])
        assert len(set(read.tolist())) == len(read)  # no position twice, repeats aside
        covered = len(read) if drop_tail else total - consumed
        assert sorted(read.tolist()) == list(range(consumed, consumed + covered))
        for positions, repeated in shares:
            for lo, hi in batch_bounds(len(positions), block):
                real = positions[lo:hi][~repeated[lo:hi]]
                assert (np.diff(real) == 1).all()  # a batch is one span of the order
        for runs in range(len(plain[0]) // block + 1):  # after every rank read `runs` whole runs: a prefix
            done = min(runs * block, len(plain[0]))
            union = np.concatenate([p[:done][~rep[:done]] for p, rep in shares])
            now = consumed_after(total, world_size=world_size, consumed=consumed, per_rank_done=done)
            assert set(union.tolist()) == set(range(consumed, min(now, consumed + covered)))
