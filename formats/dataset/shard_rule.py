"""When a size-bounded shard writer closes a shard: one pure rule of the samples' sizes, shared by the writers
and by the merge of a split conversion.

A split conversion (ranks, a plan's items) closes each part's last shard early, so its shards are not a
one-process conversion's; the loaders' shuffle permutes shards, so it would draw another order for the same
seed. The writers apply ``closes_shard`` to each sample's size (in their own units), the parts keep those sizes,
and the merge replays the rule over all of them in order (``replay_shards``): each sample's one-process shard,
the ``order_shard`` the loaders shuffle by.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def closes_shard(count: int, filled: int, size: int, max_bytes: int, max_count: int | None) -> bool:
    """Whether a sample of ``size`` closes the open shard (``count`` samples, ``filled`` bytes) before it."""
    return count > 0 and (filled + size > max_bytes or (max_count is not None and count >= max_count))


def replay_shards(sizes: Iterable[int], *, max_bytes: int, max_count: int | None, empty_bytes: int) -> np.ndarray:
    """The shard (0, 1, ...) one writer gives each sample of ``sizes`` in order; ``empty_bytes`` is what an
    open shard holds before its first sample (a tar's end blocks)."""
    shards: list[int] = []
    shard, count, filled = 0, 0, empty_bytes
    for size in sizes:
        if closes_shard(count, filled, size, max_bytes, max_count):
            shard, count, filled = shard + 1, 0, empty_bytes
        shards.append(shard)
        count, filled = count + 1, filled + size
    return np.asarray(shards, dtype=np.int32)
