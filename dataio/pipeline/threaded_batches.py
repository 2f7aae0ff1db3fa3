"""Run batch-filling tasks on a thread pool, in order, with bounded prefetch.

Each batch is split into chunks of samples; chunks of the next
``prefetch`` batches are queued FIFO on ``threads`` threads, so every thread
stays busy across batch boundaries, and batches come out in order. With
``times``, the calling thread's time planning batches (``plan``) and blocked
on the decode threads (``decode_wait``) is recorded.
Decoders release the GIL, so threads writing into one preallocated batch beat
worker processes that pickle samples (measured in bench/results).
"""

from __future__ import annotations

import concurrent.futures.thread
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Generic, TypeVar

from dataio.pipeline.stage_times import StageTimes

Batch = TypeVar("Batch")
# make_batch(i) -> (batch, [chunk tasks]); each task runs on a thread and returns a list of failures.
BatchFactory = Callable[[int], tuple[Batch, Sequence[Callable[[], list]]]]


def _daemon_at_exit() -> bool:
    """Whether this is a daemon thread and the interpreter is exiting (its thread pools refuse work then).

    A daemon thread still iterating a pass at exit then ends as ``sys.exit()`` would: its ``finally`` blocks run
    and ``threading.excepthook`` prints nothing, where a ``RuntimeError`` traceback used to reach stderr (always
    under a gloo group, whose pause at exit lets the thread run on; ``pipeline.exit_close``).
    """
    return threading.current_thread().daemon and getattr(concurrent.futures.thread, "_shutdown", False)


class ForkedPassError(RuntimeError):
    """A pass (an iterator) started in the parent and continued in a forked child, which has no decode threads."""


class BatchTimeout(RuntimeError):
    """No batch within the ``timeout`` (DataLoader raises a RuntimeError there too)."""


class ThreadedBatches(Generic[Batch]):
    """Iterate ``(batch, failures)`` for batches ``start..count-1`` built by ``make_batch``."""

    def __init__(
        self, make_batch: BatchFactory, count: int, *, pool: ThreadPoolExecutor | None, prefetch: int, start: int = 0,
        timeout: float = 0,
        times: StageTimes | None = None,
    ) -> None:
        self.make_batch, self.count, self.start = make_batch, count, start
        self.timeout = timeout  # > 0: seconds to wait for a batch before raising (DataLoader's timeout)
        self.prefetch = max(1, prefetch)
        self.pool = pool  # None: run tasks in the calling thread
        self.times = times or StageTimes()

    def _submit(self, index: int) -> tuple[Batch, list[Future] | list[list]]:
        with self.times.range("plan"):
            batch, tasks = self.make_batch(index)
        if self.pool is None:  # num_workers=0: decode in the calling thread
            return batch, [task() for task in tasks]
        try:
            return batch, [self.pool.submit(task) for task in tasks]
        except RuntimeError:
            if _daemon_at_exit():
                raise SystemExit(0) from None
            raise

    def _wait(self, part: Future, deadline: float) -> list:
        if not self.timeout:
            return part.result()
        try:
            return part.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            raise BatchTimeout(f"timed out after {self.timeout:g} seconds waiting for a batch (timeout=)") from None

    def __iter__(self) -> Iterator[tuple[Batch, list]]:
        pending: deque[tuple[Batch, list]] = deque()
        next_index = self.start
        started_in = os.getpid()
        try:
            while next_index < self.count or pending:
                if os.getpid() != started_in and self.pool is not None:  # its tasks wait on the parent's threads
                    raise ForkedPassError(f"this pass was started in process {started_in}, before the fork: its "
                                          "batches are being decoded by that process's threads; start a new pass "
                                          "here (iter(loader))")
                while next_index < self.count and len(pending) < self.prefetch:
                    pending.append(self._submit(next_index))
                    next_index += 1
                batch, parts = pending.popleft()
                failures: list = []
                deadline = time.monotonic() + self.timeout
                with self.times.range("decode_wait"):
                    for part in parts:
                        failures.extend(self._wait(part, deadline) if isinstance(part, Future) else part)
                yield batch, failures
        finally:
            for _, parts in pending:
                for part in parts:
                    if isinstance(part, Future):
                        part.cancel()
