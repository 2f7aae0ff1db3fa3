"""Which inputs each rank of a multi-node conversion packs: contiguous ranges balanced by bytes.

Pure functions over arrays, tested across many world sizes without processes. A rank takes the
inputs whose first byte falls in its 1/N of the total bytes, so the ranks' ranges tile the input in
order: concatenated in rank order, the ranks' outputs hold the samples of a one-process conversion,
in the same order. A rank may get no input (more ranks than files); an input is never split.
"""

from __future__ import annotations

import numpy as np


def rank_owners(sizes: np.ndarray, world_size: int) -> np.ndarray:
    """``(len(sizes),)`` int64: the rank of each input, non-decreasing, in ``[0, world_size)``.

    Input i goes to ``floor(bytes before i * world_size / total bytes)``; zero-byte inputs count as
    one byte, so an all-empty input list is still spread by count.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    weights = np.maximum(np.asarray(sizes, dtype=np.int64), 1)
    before = np.concatenate([[0], np.cumsum(weights)[:-1]]) if len(weights) else np.zeros(0, np.int64)
    total = int(weights.sum()) if len(weights) else 1
    # Python ints: bytes x world_size can pass 2**63 for petabyte inputs
    return np.array([b * world_size // total for b in before.tolist()], dtype=np.int64)


def rank_range(sizes: np.ndarray, rank: int, world_size: int) -> tuple[int, int]:
    """``(start, stop)``: the inputs ``sizes[start:stop]`` that ``rank`` packs (possibly empty)."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in 0..{world_size - 1}, got {rank}")
    owners = rank_owners(sizes, world_size)
    return int(np.searchsorted(owners, rank, "left")), int(np.searchsorted(owners, rank, "right"))


def rank_folder(rank: int, world_size: int) -> str:
    """The subfolder of OUT that rank ``rank`` of ``world_size`` writes: ``rank-00001-of-00004``."""
    return f"rank-{rank:05d}-of-{world_size:05d}"
