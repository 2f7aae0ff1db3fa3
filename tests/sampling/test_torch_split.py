"""dataio's split of an epoch among ranks against torch's own DataLoader + DistributedSampler, as pure functions.

For world sizes 1 to 5 and data set sizes that do and do not divide, every
combination of the sampler's ``drop_last`` (dataio: ``drop_tail``), the
loader's ``drop_last``, shuffle and batch size: each rank gets the number of
batches and the batch sizes torch gives; unshuffled, the very same sample ids
in the same order; shuffled (dataio's own seeded order), the same counts of
distinct and repeated samples.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from torch.utils.data import DataLoader, DistributedSampler

from dataio.sampling.partition import batch_bounds, check_world, epoch_order, rank_share

SIZES = [1, 2, 3, 7, 12, 13, 31, 45, 60]  # 60 divides by 1..5, 12 by 1..4, 13, 31 and 7 by 1 only


def torch_batches(num_samples: int, world_size: int, rank: int, *, shuffle: bool, sampler_drop: bool,
                  loader_drop: bool, batch_size: int) -> list[list[int]]:
    sampler = DistributedSampler(range(num_samples), num_replicas=world_size, rank=rank, shuffle=shuffle, seed=3,
                                 drop_last=sampler_drop)
    loader = DataLoader(range(num_samples), batch_size=batch_size, sampler=sampler, drop_last=loader_drop)
    return [batch.tolist() for batch in loader]


def dataio_batches(num_samples: int, world_size: int, rank: int, *, shuffle: bool, sampler_drop: bool,
                   loader_drop: bool, batch_size: int) -> list[list[int]]:
    """Composed as ImageLoader composes them (``_share``, ``_bounds``)."""
    check_world(num_samples, world_size, drop_last=loader_drop, multiple=batch_size, drop_tail=sampler_drop)
    order = epoch_order(num_samples, seed=3, epoch=0, shuffle=shuffle)
    positions, _ = rank_share(num_samples, world_size=world_size, rank=rank, drop_last=False,
                              drop_tail=sampler_drop)
    samples = order[positions]
    return [samples[lo:hi].tolist() for lo, hi in batch_bounds(len(samples), batch_size, loader_drop)]


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("shuffle", [False, True])
def test_each_rank_gets_torchs_batches(world_size, shuffle):
    compared = 0
    for num_samples, sampler_drop, loader_drop, batch_size in itertools.product(SIZES, [False, True], [False, True],
                                                                                [1, 3, 4]):
        options = dict(shuffle=shuffle, sampler_drop=sampler_drop, loader_drop=loader_drop, batch_size=batch_size)
        theirs = [torch_batches(num_samples, world_size, r, **options) for r in range(world_size)]
        if not theirs[0]:  # torch gives every rank an empty loader: dataio refuses at start-up, naming why
            with pytest.raises(ValueError, match="no data"):
                dataio_batches(num_samples, world_size, 0, **options)
            continue
        ours = [dataio_batches(num_samples, world_size, r, **options) for r in range(world_size)]
        where = f"{num_samples} samples, {options}"
        if not shuffle:
            assert ours == theirs, where  # the same ids, in the same batches, in the same order
        for mine, torchs in zip(ours, theirs, strict=True):
            assert [len(b) for b in mine] == [len(b) for b in torchs], where  # batch count and sizes
        mine_all = Counter(s for batches in ours for b in batches for s in b)
        torch_all = Counter(s for batches in theirs for b in batches for s in b)
        assert len(mine_all) == len(torch_all) and sum(mine_all.values()) == sum(torch_all.values()), where
        compared += 1
    assert compared >= 70  # of 108: only the tiny sizes leave every rank empty (34 at world size 5)


def test_drop_last_without_a_sampler_is_torchs_on_one_process_and_full_batches_on_many():
    # one process: DataLoader(range(45), batch_size=4, drop_last=True) gives 11 batches, the sample 44 dropped
    positions, _ = rank_share(45, world_size=1, rank=0, drop_last=True, multiple=4)
    assert positions.tolist() == list(range(44))
    # several ranks and no sampler: drop_last gives every rank the same full batches of distinct samples
    shares = [rank_share(45, world_size=3, rank=r, drop_last=True, multiple=4)[0] for r in range(3)]
    assert [len(s) for s in shares] == [12, 12, 12]
    assert sorted(np.concatenate(shares).tolist()) == list(range(36))


def batches_from(total, world_size, rank, consumed, *, drop_tail, drop_last, batch_size=3) -> list[list[int]]:
    """(positions, as the loader reads them) per batch of one rank, from ``consumed``."""
    positions, repeated = rank_share(total, world_size=world_size, rank=rank, consumed=consumed, drop_last=False,
                                     drop_tail=drop_tail)
    marked = np.where(repeated, -1, positions)  # a padding repeat as -1
    return [marked[lo:hi].tolist() for lo, hi in batch_bounds(len(marked), batch_size, drop_last)]


@pytest.mark.parametrize("drop_tail, drop_last", itertools.product([False, True], [False, True]))
def test_resume_continues_torchs_batches_and_elastic_resume_reads_nothing_twice(drop_tail, drop_last):
    for total, world_size, done in [(31, 2, 2), (45, 4, 1), (60, 5, 3), (13, 3, 1)]:
        full = [batches_from(total, world_size, r, 0, drop_tail=drop_tail, drop_last=drop_last)
                for r in range(world_size)]
        consumed = min(world_size * 3 * done, total)
        rest = [batches_from(total, world_size, r, consumed, drop_tail=drop_tail, drop_last=drop_last)
                for r in range(world_size)]
        assert rest == [batches[done:] for batches in full], (total, world_size)  # the same world: the same batches
        for other in (1, 2, 3):  # another world size: each position read at most once, none of the prefix again
            after = [s for r in range(other) for batch in batches_from(
                total, other, r, consumed, drop_tail=drop_tail, drop_last=drop_last) for s in batch if s >= 0]
            assert len(after) == len(set(after)) and min(after, default=consumed) >= consumed
            if not (drop_tail or drop_last):
                assert sorted(after) == list(range(consumed, total))  # padded: every remaining position once
