"""Which samples each rank reads in an epoch, as pure functions of the arguments.

No processes, no state: the loader, the tests and any backend call these with
the same arguments and get the same arrays.
"""

from __future__ import annotations

import numpy as np


def epoch_order(num_samples: int, *, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
    """Global sample order of an epoch: int64 array of shape (num_samples,), a permutation."""
    if not shuffle:
        return np.arange(num_samples, dtype=np.int64)
    rng = np.random.default_rng([seed, epoch, 0x5EED])
    return rng.permutation(num_samples).astype(np.int64)


def rank_samples(
    num_samples: int, *, world_size: int, rank: int, seed: int, epoch: int, shuffle: bool, drop_last: bool
) -> np.ndarray:
    """The samples of ``rank``: int64 array of shape (ceil or floor of num_samples / world_size,).

    Every rank gets the same count. With ``drop_last`` the remainder is dropped;
    otherwise the order wraps around and repeats its first samples (as
    ``DistributedSampler`` does). Ranks take strided positions of the order.
    """
    if num_samples == 0:
        raise ValueError("no samples to partition")
    order = epoch_order(num_samples, seed=seed, epoch=epoch, shuffle=shuffle)
    per_rank = num_samples // world_size if drop_last else -(-num_samples // world_size)
    if per_rank == 0:
        raise ValueError(f"{num_samples} samples cannot give each of {world_size} ranks one sample")
    total = per_rank * world_size
    if total > num_samples:
        order = np.resize(order, total)  # repeats from the start
    return order[rank:total:world_size]


def batch_bounds(count: int, batch_size: int, drop_last: bool) -> list[tuple[int, int]]:
    """(start, stop) positions of each batch over ``count`` samples."""
    stop = count - count % batch_size if drop_last else count
    return [(start, min(start + batch_size, stop)) for start in range(0, stop, batch_size)]
