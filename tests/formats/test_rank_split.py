"""Partition of a conversion's inputs across ranks: pure functions, many world sizes, no processes."""

from __future__ import annotations

import numpy as np
import pytest

from dataio.formats.rank_split import rank_owners, rank_range


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 7, 8, 16, 33, 64])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ranges_tile_the_input_in_order_and_balance_bytes(world_size, seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 200_000, int(rng.integers(0, 500)))
    ranges = [rank_range(sizes, rank, world_size) for rank in range(world_size)]
    covered = [i for start, stop in ranges for i in range(start, stop)]
    assert covered == list(range(len(sizes)))  # every input once, in order, ranks in order
    owners = rank_owners(sizes, world_size)
    assert np.all(np.diff(owners) >= 0) and (len(owners) == 0 or owners.max() < world_size)
    if len(sizes) >= 4 * world_size:
        loads = np.array([np.maximum(sizes[s:e], 1).sum() for s, e in ranges])
        assert loads.max() <= np.maximum(sizes, 1).sum() / world_size + np.maximum(sizes, 1).max()


def test_more_ranks_than_inputs_leaves_some_ranks_empty_and_never_splits_an_input():
    sizes = np.array([10, 10, 10])
    ranges = [rank_range(sizes, r, 8) for r in range(8)]
    assert sum(stop - start for start, stop in ranges) == 3
    assert sum(stop == start for start, stop in ranges) == 5


def test_bad_rank_or_world_size_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match="world_size"):
        rank_owners(np.array([1]), 0)
    with pytest.raises(ValueError, match="rank"):
        rank_range(np.array([1]), 3, 3)
