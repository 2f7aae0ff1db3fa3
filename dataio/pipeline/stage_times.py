"""Where a loader's time goes: seconds and calls per named stage, per epoch, from any thread.

A loader's stages (shard read, decode, host resize, host-to-device copy,
device augmentation, and the consumer's wait in ``next()``) run on several
threads at once, so their seconds add up to more than the wall time: they are
thread-seconds, to compare stages with each other and with the wall time
times the threads. Timing costs two ``time.perf_counter`` calls per range and
one lock per flush (decode threads flush once per chunk of samples, not per
sample): measured 1.5 us more per range than a no-op context manager on the
busy 2-core VM, four ranges per image, so about 1% of the ~0.7 ms per image
decode and resize take there.

``clock`` is the stopwatch: wall time by default. ``time.thread_time`` (CPU
seconds of the thread: 0.5 us a call against 0.12) times the work itself, as
``dataio bench images`` does to set each stage beside its single-thread limit
on a machine shared with other processes, where wall-clock ranges also count
the time a thread waited for a core.

With ``profile=True`` every range is also a ``torch.profiler.record_function``
range (on the thread that runs it, so it shows on that thread's row of a
Chrome trace, TensorBoard or Perfetto) and, when CUDA is available, an NVTX
range for Nsight Systems. On CUDA, the copy and the augmentation run
asynchronously on a side stream; their ranges are then timed with CUDA events
and resolved once the events have completed, so they report the device's
time, not the launch's.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch

PREFIX = "dataio."  # profiler range names: dataio.read, dataio.decode, ...


class StageTimes:
    """Thread-safe accumulation of ``seconds`` and ``calls`` per stage, per epoch (``as_dict`` is JSON-safe)."""

    def __init__(self, *, profile: bool = False, clock: Callable[[], float] = time.perf_counter) -> None:
        self.profile = profile
        self.clock = clock  # what ranges and laps are timed with (module docstring)
        self.nvtx = profile and torch.cuda.is_available()
        self.epoch = 0
        self._lock = threading.Lock()
        self._epochs: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0]))
        self._pending: list[tuple[int, str, Any, Any]] = []  # (epoch, stage, start event, end event) on CUDA

    def begin(self, epoch: int) -> None:
        """Charge what follows to ``epoch`` (a loader calls this at the start of each pass)."""
        self.epoch = epoch

    def add(self, stage: str, seconds: float, calls: int = 1, *, epoch: int | None = None) -> None:
        with self._lock:
            entry = self._epochs[self.epoch if epoch is None else epoch][stage]
            entry[0] += seconds
            entry[1] += calls

    def add_many(self, seconds: dict[str, float], calls: int, epoch: int | None = None) -> None:
        """Several stages at once under one lock (a decode thread's chunk)."""
        with self._lock:
            stages = self._epochs[self.epoch if epoch is None else epoch]
            for stage, spent in seconds.items():
                stages[stage][0] += spent
                stages[stage][1] += calls

    def range(self, stage: str, device: torch.device | None = None) -> "Range":
        """``with times.range("copy"): ...`` times the block (with CUDA events for a CUDA ``device``)."""
        return Range(self, stage, device if device is not None and device.type == "cuda" else None)

    def lap(self) -> "Lap":
        """A per-thread stopwatch for consecutive stages, flushed once (see ``Lap``)."""
        return Lap(self)

    def _resolve(self, wait: bool) -> None:
        """Move completed CUDA event pairs into the totals (all of them, synchronising, with ``wait``)."""
        if not self._pending:
            return
        with self._lock:
            pending, self._pending = self._pending, []
        left = []
        for epoch, stage, start, end in pending:
            if wait or end.query():
                end.synchronize()
                self.add(stage, start.elapsed_time(end) / 1000, epoch=epoch)
            else:
                left.append((epoch, stage, start, end))
        with self._lock:
            self._pending = left + self._pending

    def seconds(self, epoch: int | None = None) -> dict[str, float]:
        """Seconds per stage in ``epoch`` (default: the current one)."""
        self._resolve(wait=True)
        with self._lock:
            stages = self._epochs.get(self.epoch if epoch is None else epoch, {})
            return {stage: entry[0] for stage, entry in stages.items()}

    def as_dict(self) -> dict[str, dict[str, dict[str, float]]]:
        """``{epoch: {stage: {"seconds": s, "calls": n}}}`` with string epoch keys (JSON objects)."""
        self._resolve(wait=True)
        with self._lock:
            return {str(epoch): {stage: {"seconds": entry[0], "calls": int(entry[1])}
                                 for stage, entry in sorted(stages.items())}
                    for epoch, stages in sorted(self._epochs.items())}


class Range:
    """One timed block; a profiler range and an NVTX range too when the times profile."""

    __slots__ = ("times", "stage", "device", "_start", "_record", "_events")

    def __init__(self, times: StageTimes, stage: str, device: torch.device | None) -> None:
        self.times, self.stage, self.device = times, stage, device
        self._record = self._events = None

    def __enter__(self) -> "Range":
        times = self.times
        if times.profile:
            self._record = torch.profiler.record_function(PREFIX + self.stage)
            self._record.__enter__()
            if times.nvtx:
                torch.cuda.nvtx.range_push(PREFIX + self.stage)
        if self.device is not None:
            self._events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            self._events[0].record()
        self._start = times.clock()
        return self

    def __exit__(self, *exc: object) -> None:
        times = self.times
        if self._events is not None:
            self._events[1].record()
            with times._lock:
                times._pending.append((times.epoch, self.stage, *self._events))
            times._resolve(wait=False)
        else:
            times.add(self.stage, times.clock() - self._start)
        if self._record is not None:
            if times.nvtx:
                torch.cuda.nvtx.range_pop()
            self._record.__exit__(None, None, None)


class Lap:
    """Stages on one thread: ``with lap("read"): ...; with lap("decode"): ...``, then ``flush()``.

    The seconds add up locally and reach the shared ``StageTimes`` under one
    lock in ``flush``, so a decode thread takes the lock once per chunk. Ranges
    may nest; a stage's seconds exclude those of the ranges inside it.
    """

    __slots__ = ("times", "seconds", "items", "finished", "_stage", "_stack", "_epoch")

    def __init__(self, times: StageTimes) -> None:
        self.times = times
        self.seconds: dict[str, float] = {}
        self.items = 0  # samples the lap covered: the calls its stages are counted with
        self.finished = 0.0  # perf_counter at the last flush: when the thread's work ended
        self._epoch = times.epoch  # the epoch when the work was planned, not when it ends
        self._stack: list[list[Any]] = []  # [stage, start, profiler range, seconds of nested ranges]

    def __call__(self, stage: str) -> "Lap":
        self._stage = stage
        return self

    def __enter__(self) -> "Lap":
        record = None
        if self.times.profile:
            record = torch.profiler.record_function(PREFIX + self._stage)
            record.__enter__()
            if self.times.nvtx:
                torch.cuda.nvtx.range_push(PREFIX + self._stage)
        self._stack.append([self._stage, self.times.clock(), record, 0.0])
        return self

    def __exit__(self, *exc: object) -> None:
        stage, start, record, inner = self._stack.pop()
        spent = self.times.clock() - start
        self.seconds[stage] = self.seconds.get(stage, 0.0) + spent - inner
        if self._stack:
            self._stack[-1][3] += spent
        if record is not None:
            if self.times.nvtx:
                torch.cuda.nvtx.range_pop()
            record.__exit__(None, None, None)

    def flush(self) -> None:
        self.finished = time.perf_counter()
        if self.seconds:
            self.times.add_many(self.seconds, max(1, self.items), epoch=self._epoch)
            self.seconds = {}
            self.items = 0


class _NoLap:
    """A ``Lap`` that times nothing, for callers that do not time (the default of ``decode_crop_into``)."""

    def __call__(self, stage: str) -> "_NoLap":
        return self

    def __enter__(self) -> "_NoLap":
        return self

    def __exit__(self, *exc: object) -> None:
        return None


NO_LAP = _NoLap()


def all_threads_config() -> Any:
    """``experimental_config`` for ``torch.profiler.profile`` that records every thread, not only the one
    that started the profiler: without it the decode threads' ranges are missing from the trace (checked on
    torch 2.13). None where this torch lacks the option (then only the consumer's thread is recorded)."""
    try:
        return torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
    except (AttributeError, TypeError):
        return None
