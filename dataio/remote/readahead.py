"""Fetch the encoded bytes of the next batches while the current one decodes (remote shards).

The loader knows the epoch order, so ``take(i)`` hands back batch ``i``'s
fetch and starts those of batches ``i+1 .. i+depth``, on ``threads`` threads
of their own: with enough bandwidth the decode threads never wait on the
network. Each fetch is one ``read_many`` (one ``cat_ranges`` call) per batch.
The threads are an ``AbandonablePool``: ``close()`` lets go of reads in
flight (their futures fail at once) instead of waiting for a stalled store.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

from dataio.remote.abandonable_pool import AbandonablePool


class Readahead:
    """Futures of ``fetch(i)`` for batches ``0..count-1``, started ``depth`` batches ahead of ``take``."""

    def __init__(self, fetch: Callable[[int], list], count: int, *, depth: int, threads: int) -> None:
        self.fetch, self.count, self.depth = fetch, count, depth
        self._pool = AbandonablePool(threads, "dataio-readahead")
        self._futures: dict[int, Future] = {}
        self._next = 0

    def take(self, index: int) -> Future:
        """Batch ``index``'s fetch (started now if it was not yet), after starting the next ``depth``."""
        self._next = max(self._next, index)
        while self._next < min(self.count, index + 1 + self.depth):
            self._futures[self._next] = self._pool.submit(self.fetch, self._next)
            self._next += 1
        future = self._futures.pop(index, None)
        return future if future is not None else self._pool.submit(self.fetch, index)

    def close(self) -> None:
        """Fail every fetch not finished (``Abandoned``), without waiting for those in flight."""
        self._futures.clear()
        self._pool.abandon("the loader's pass was closed")
