"""How many items a plan cuts its input into: pure arithmetic, tested without an engine.

More items balance a cluster better and lose less to a killed node (a retry redoes one item); fewer items
write fewer small shards (each item closes its last shard short) and cost less per-task overhead. The
default aims at ``ITEM_BYTES`` of input per item and at least ``ITEMS_PER_CPU`` items per CPU of the
cluster, so a slow or lost node's work is spread, and never more items than units (a unit is never cut).
"""

from __future__ import annotations

import math

ITEM_BYTES = 256 * 2**20  # input bytes per item by default: a few shards per item, seconds to minutes of work
ITEMS_PER_CPU = 2  # at least this many items per CPU of the cluster
MAX_ITEMS = 99_999  # item folders are named rank-NNNNN-of-NNNNN


def choose_items(total_bytes: int, units: int, cpus: int, requested: int | None = None,
                 item_bytes: int = ITEM_BYTES) -> int:
    """The number of items: ``requested`` if given (at most ``units``), else by bytes and CPUs; >= 1."""
    if units < 1:
        return 1
    if requested is not None:
        if requested < 1:
            raise ValueError(f"items must be >= 1, got {requested}")
        return min(requested, units, MAX_ITEMS)
    by_bytes = math.ceil(max(total_bytes, 1) / max(item_bytes, 1))
    return max(1, min(max(by_bytes, ITEMS_PER_CPU * max(cpus, 1)), units, MAX_ITEMS))
