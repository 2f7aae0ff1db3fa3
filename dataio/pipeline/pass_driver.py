"""The pass driver both loaders share: a source's batches read on decode threads, in order, with bounded
prefetch, their failed samples handled by the error policy once, for any kind of sample.

``host_batches(plan)`` yields a ``HostBatch`` per batch of the plan, empty when
every sample failed under ``skip`` (the loader counts its positions, then drops
it). Each batch's read tasks are queued on the pool (``ThreadedBatches``; with
no threads they run in the calling thread at the same places); ``inline`` (the
text loader) reads each batch when it is asked for, with no queue in between
(a text batch is ~20 us: the queue's bookkeeping would be a tenth of it). The
pool is made in the process that reads: a forked child gets threads of its own.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dataio.formats.errors import SampleError
from dataio.pipeline.error_policy import ErrorPolicy
from dataio.pipeline.host_batch import HostBatch
from dataio.pipeline.loader_stats import LoaderStats
from dataio.pipeline.pass_plan import PassPlan
from dataio.pipeline.sample_source import BatchStart, SampleSource
from dataio.pipeline.thread_tuner import ThreadGate
from dataio.pipeline.threaded_batches import ThreadedBatches

KeyOf = Callable[[int], Any]  # the seed key of the batch starting at a global position


class PassDriver:
    """Reads ``source``'s batches for a loader: ``threads`` decode threads (0: inline), ``prefetch`` batches
    in flight per thread, ``timeout`` seconds per batch (0: none), failures by ``policy`` into ``stats``."""

    def __init__(self, source: SampleSource, stats: LoaderStats, *, threads: int, prefetch: int, timeout: float,
                 policy: ErrorPolicy, inline: bool = False, name: str = "dataio-decode") -> None:
        self.source, self.stats, self.policy, self.inline = source, stats, policy, inline
        self.threads, self.prefetch, self.timeout, self.name = threads, prefetch, timeout, name
        self._gate = ThreadGate(stats.tuner.threads) if stats.tuner is not None else None
        self._pool = self._new_pool()

    def _new_pool(self) -> ThreadPoolExecutor | None:
        """The decode threads, made in this process (``_pool_pid`` tells a forked child)."""
        self._pool_pid = os.getpid()
        return ThreadPoolExecutor(self.threads, thread_name_prefix=self.name) if self.threads else None

    def host_batches(self, plan: PassPlan, key_of: KeyOf) -> Iterator[HostBatch]:
        """The plan's batches in order, each with its failed samples handled by the policy and dropped."""
        if self._pool is not None and self._pool_pid != os.getpid():
            # A forked child iterating its copy of the loader: the executor's threads stayed in the parent, and
            # a decode thread on a num_workers="auto" gate the parent's threads held at the fork would wait on it.
            self._pool = self._new_pool()
            if self._gate is not None:
                self._gate = ThreadGate(self._gate.limit)
        self.source.begin_pass(plan)
        try:
            yield from self._inline(plan, key_of) if self.inline else self._threaded(plan, key_of)
        finally:
            self.source.end_pass()

    def _threaded(self, plan: PassPlan, key_of: KeyOf) -> Iterator[HostBatch]:
        tuner = self.stats.tuner
        if tuner is not None:
            tuner.restart()
        producer = ThreadedBatches(lambda i: self._start(plan, i, key_of), len(plan), pool=self._pool,
                                   prefetch=self.prefetch * max(1, self.threads), timeout=self.timeout,
                                   times=self.stats.stages)
        for batch, failures in producer:
            if tuner is not None and not tuner.done:  # auto: decode throughput at the gate's count
                self._gate.set_limit(tuner.observe(len(batch), batch.finished(), time.perf_counter()))
            yield self._handled(batch, failures)

    def _inline(self, plan: PassPlan, key_of: KeyOf) -> Iterator[HostBatch]:
        for index in range(len(plan)):
            yield self.read(plan, index, key_of)

    def read(self, plan: PassPlan, index: int, key_of: KeyOf) -> HostBatch:
        """Batch ``index`` of ``plan`` read in the calling thread, its failures handled."""
        batch, tasks = self._start(plan, index, key_of)
        return self._handled(batch, [failure for task in tasks for failure in task()])

    def _start(self, plan: PassPlan, index: int, key_of: KeyOf) -> tuple[HostBatch, list]:
        ids, repeated = plan.batch(index)
        key = key_of(int(plan.steps[index]))
        start: BatchStart = self.source.start_batch(index, ids, key)
        batch = HostBatch(start.fields, ids, repeated, int(plan.units[index]), key, start.shared, start.laps,
                          start.extra)
        return batch, [self._gated(task) for task in start.tasks] if self._gate is not None else list(start.tasks)

    def _gated(self, task: Callable[[], list]) -> Callable[[], list]:
        """With ``num_workers="auto"``, the tuner's count of the pool's threads work at once."""
        def run() -> list:
            with self._gate:
                return task()
        return run

    def _handled(self, batch: HostBatch, failures: list[tuple[int, SampleError]]) -> HostBatch:
        """The error policy, once for every kind of sample: raise the first error, or count each and drop them."""
        if failures:
            failures = sorted(failures, key=lambda failure: failure[0])
            for _, error in failures:
                self.stats.handle(self.policy, error)
            batch = self.source.without(batch, [position for position, _ in failures])
        self.stats.samples_ok += batch.extra.get("samples_ok", len(batch))  # packed text: its document pieces
        return batch

    def close(self) -> None:
        """Stop the decode threads (queued tasks cancelled, running ones finished)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
