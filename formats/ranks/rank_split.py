"""Which inputs each rank of a multi-node conversion packs: contiguous ranges of split units balanced by bytes.

Pure functions over arrays, tested across many world sizes without processes. The units are what a
conversion can cut between: image files, rows of a Parquet image source, and for text sources byte
ranges of a file cut at document ends (``text_sources.text_pieces``) or Parquet row groups. The ranks'
ranges tile the units in order, so concatenated in rank order their outputs hold the samples of a
one-process conversion, in the same order.

Rank boundary k is the unit boundary nearest to k/N of the total bytes, then moved so that every rank
gets at least one unit while there are as many units as ranks: a rank's load is at most 1/N of the bytes
plus one unit, or a single unit, and a rank is empty only when there are fewer units than ranks (the
rule before, "a unit goes to the rank its first byte falls in", gave two near-equal files on two ranks
both to rank 0 whenever the first was the smaller).
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np


def rank_bounds(sizes: np.ndarray, world_size: int) -> np.ndarray:
    """``(world_size + 1,)`` int64: rank r packs units ``bounds[r]:bounds[r + 1]``; non-decreasing, 0 to len.

    Zero-byte units weigh one byte, so all-empty units are still spread by count.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    weights = np.maximum(np.asarray(sizes, dtype=np.int64), 1)
    units = len(weights)
    # Python ints: bytes x world_size can pass 2**63 for petabyte inputs
    before = [0] + np.cumsum(weights).tolist()  # before[i]: bytes of units 0..i-1
    total = before[-1]
    bounds = [0] * (world_size + 1)
    bounds[world_size] = units
    for k in range(1, world_size):
        target = k * total  # k/N of the bytes, times N
        i = bisect_right(before, target // world_size) - 1  # the last boundary at or before the target
        if i < units and abs(before[i + 1] * world_size - target) < abs(before[i] * world_size - target):
            i += 1  # the next boundary is nearer
        if units >= world_size:  # room for one unit on each rank: ranks k.. need N - k units after it
            i = min(max(i, k), units - (world_size - k))
        else:
            i = min(k, units)
        bounds[k] = max(i, bounds[k - 1] + (units >= world_size))
    return np.array(bounds, dtype=np.int64)


def rank_owners(sizes: np.ndarray, world_size: int) -> np.ndarray:
    """``(len(sizes),)`` int64: the rank of each unit, non-decreasing, in ``[0, world_size)``."""
    bounds = rank_bounds(sizes, world_size)
    return np.repeat(np.arange(world_size, dtype=np.int64), np.diff(bounds))


def rank_range(sizes: np.ndarray, rank: int, world_size: int) -> tuple[int, int]:
    """``(start, stop)``: the units ``sizes[start:stop]`` that ``rank`` packs (empty only with fewer units
    than ranks)."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in 0..{world_size - 1}, got {rank}")
    bounds = rank_bounds(sizes, world_size)
    return int(bounds[rank]), int(bounds[rank + 1])


def rank_folder(rank: int, world_size: int) -> str:
    """The subfolder of OUT that rank ``rank`` of ``world_size`` writes: ``rank-00001-of-00004``."""
    return f"rank-{rank:05d}-of-{world_size:05d}"
