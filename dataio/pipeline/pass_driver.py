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
from dataio.pipeline.source_checks import check_dropped, check_failures
from dataio.pipeline.thread_tuner import ThreadGate
from dataio.pipeline.threaded_batches import ThreadedBatches

KeyOf = Callable[[int], Any]  # the seed key of the batch starting at a global position


class PassDriver:
    """Reads ``source``'s batches for a loader: ``threads`` decode threads (0: inline), ``prefetch`` batches
    in flight per thread, ``timeout`` seconds per batch (0: none), failures by ``policy`` into ``stats``."""

    def __init__(self, source: SampleSource, stats: LoaderStats, *, threads: int, prefetch: int, timeout: float,
                 policy: ErrorPolicy, inline: bool = False, name: str = "dataio-decode", by_samples: bool = False
                 ) -> None:
        self.source, self.stats, self.policy, self.inline = source, stats, policy, inline
        self.by_samples = by_samples  # failures are sample positions, dropped by ``without`` (source_checks)
        self.threads, self.prefetch, self.timeout, self.name = threads, prefetch, timeout, name
        self._gate = ThreadGate(stats.tuner.threads) if stats.tuner is not None else None
        self._pool = self._new_pool()

    def _new_pool(self) -> ThreadPoolExecutor | None:
        """The decode threads, made in this process (``_pool_pid`` tells a forked child)."""
        self._pool_pid = os.getpid()
        return ThreadPoolExecutor(self.threads, thread_name_prefix=self.name) if self.threads else None

    def host_batches(self, plan: PassPlan, key_of: KeyOf | None) -> Iterator[HostBatch]:
        """The plan's batches in order, each with its failed samples handled by the policy and dropped;
        ``key_of(step)`` seeds each batch (None: the source draws nothing)."""
        if self._pool is not None and self._pool_pid != os.getpid():
            # A forked child iterating its copy of the loader: the executor's threads stayed in the parent, and
            # a decode thread on a num_workers="auto" gate the parent's threads held at the fork would wait on it.
            self._pool = self._new_pool()
            if self._gate is not None:
                self._gate = ThreadGate(self._gate.limit)
        return self._inline(plan, key_of) if self.inline else self._threaded(plan, key_of)

    def _threaded(self, plan: PassPlan, key_of: KeyOf | None) -> Iterator[HostBatch]:
        tuner = self.stats.tuner
        if tuner is not None:
            tuner.restart()
        producer = ThreadedBatches(lambda i: self._start(plan, i, key_of), len(plan), pool=self._pool,
                                   prefetch=self.prefetch * max(1, self.threads), timeout=self.timeout,
                                   times=self.stats.stages)
        self.source.begin_pass(plan)
        try:
            for batch, failures in producer:
                if tuner is not None and not tuner.done:  # auto: decode throughput at the gate's count
                    self._gate.set_limit(tuner.observe(len(batch.samples), batch.finished(), time.perf_counter()))
                yield self._handled(batch, failures)
        finally:
            self.source.end_pass()

    def _inline(self, plan: PassPlan, key_of: KeyOf | None) -> Iterator[HostBatch]:
        self.source.begin_pass(plan)
        try:
            for index in range(len(plan)):
                yield self.read(plan, index, key_of)
        finally:
            self.source.end_pass()

    def read(self, plan: PassPlan, index: int, key_of: KeyOf | None) -> HostBatch:
        """Batch ``index`` of ``plan`` read in the calling thread, its failures handled."""
        batch, tasks = self._start(plan, index, key_of)
        failures = [failure for task in tasks for failure in task()]
        if failures or batch.extra:
            return self._handled(batch, failures)
        self.stats.samples_ok += len(batch.samples)  # the usual batch: no failure, nothing of the source's
        return batch

    def _start(self, plan: PassPlan, index: int, key_of: KeyOf | None) -> tuple[HostBatch, list]:
        start, stop = plan.bounds[index]  # Python ints: a numpy scalar per index cost ~0.1 us each
        ids, repeated = plan.ids[start:stop], plan.repeated[start:stop]
        key = key_of(plan.step_list[index]) if key_of is not None else None
        begun: BatchStart = self.source.start_batch(index, ids, key)
        batch = HostBatch(begun.fields, ids, repeated, plan.unit_list[index], key, begun.shared, begun.laps,
                          begun.extra)
        return batch, [self._gated(task) for task in begun.tasks] if self._gate is not None else begun.tasks

    def _gated(self, task: Callable[[], list]) -> Callable[[], list]:
        """With ``num_workers="auto"``, the tuner's count of the pool's threads work at once."""
        def run() -> list:
            with self._gate:
                return task()
        return run

    def _handled(self, batch: HostBatch, failures: list[tuple[int, SampleError]]) -> HostBatch:
        """The error policy, once for every kind of sample: raise the first error, or count each and drop them."""
        if failures:
            check_failures(self.source, failures, len(batch) if self.by_samples else None)
            if self.by_samples:  # one error a sample: two of its tasks may fail it (its image and its masks)
                failures = list({position: error for position, error in reversed(failures)}.items())
            failures = sorted(failures, key=lambda failure: failure[0])
            for _, error in failures:
                self.stats.handle(self.policy, error)
            positions = [position for position, _ in failures]
            before, batch = len(batch), self.source.without(batch, positions)
            if self.by_samples:
                check_dropped(self.source, before, batch, positions)
        self.stats.samples_ok += batch.extra.get("samples_ok", len(batch.samples))  # packed text: document pieces
        return batch

    def close(self) -> None:
        """Stop the decode threads (queued tasks cancelled, running ones finished)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
