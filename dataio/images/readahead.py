"""Fetch the encoded bytes of the next batches while the current one decodes (remote shards).

The loader knows the epoch order, so ``take(i)`` hands back batch ``i``'s
fetch and starts those of batches ``i+1 .. i+depth``, on ``threads`` threads
of their own: with enough bandwidth the decode threads never wait on the
network. Each fetch is one ``read_many`` (one ``cat_ranges`` call) per batch.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor


class Readahead:
    """Futures of ``fetch(i)`` for batches ``0..count-1``, started ``depth`` batches ahead of ``take``."""

    def __init__(self, fetch: Callable[[int], list], count: int, *, depth: int, threads: int) -> None:
        self.fetch, self.count, self.depth = fetch, count, depth
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="dataio-readahead")
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
        """Cancel the fetches not started; running ones finish on their own."""
        for future in self._futures.values():
            future.cancel()
        self._futures.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)
