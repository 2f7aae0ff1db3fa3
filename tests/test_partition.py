"""The rank partition as a pure function, over many world sizes, no processes."""

from __future__ import annotations

import numpy as np
import pytest

from dataio.partition import batch_bounds, epoch_order, rank_samples


@pytest.mark.parametrize("num_samples", [1, 7, 64, 1001])
@pytest.mark.parametrize("world_size", [1, 2, 3, 5, 8, 16])
@pytest.mark.parametrize("drop_last", [False, True])
def test_equal_shares_cover_the_data(num_samples, world_size, drop_last):
    if drop_last and num_samples < world_size:
        with pytest.raises(ValueError):
            rank_samples(num_samples, world_size=world_size, rank=0, seed=1, epoch=0, shuffle=True, drop_last=True)
        return
    shares = [rank_samples(num_samples, world_size=world_size, rank=r, seed=1, epoch=0, shuffle=True,
                           drop_last=drop_last) for r in range(world_size)]
    assert len({len(s) for s in shares}) == 1, "every rank must get the same count"
    union = np.concatenate(shares)
    if drop_last:
        assert len(set(union.tolist())) == len(union) == num_samples // world_size * world_size
    else:
        assert set(union.tolist()) == set(range(num_samples))
        assert len(union) - num_samples < world_size


def test_order_depends_on_seed_and_epoch_only():
    a = epoch_order(100, seed=1, epoch=2, shuffle=True)
    assert np.array_equal(a, epoch_order(100, seed=1, epoch=2, shuffle=True))
    assert not np.array_equal(a, epoch_order(100, seed=1, epoch=3, shuffle=True))
    assert not np.array_equal(a, epoch_order(100, seed=2, epoch=2, shuffle=True))
    assert sorted(a) == list(range(100))


def test_batch_bounds():
    assert batch_bounds(10, 4, False) == [(0, 4), (4, 8), (8, 10)]
    assert batch_bounds(10, 4, True) == [(0, 4), (4, 8)]
