"""``num_workers="auto"``: pick the decode thread count by measuring throughput over the first batches.

The tuner climbs a ladder of thread counts (1, 2, 3, 4, 6, 8, 12, ... up to
the budget). Each step compares the count in use (A) with the next one (B)
in interleaved windows, B A B after A's, so a change of load on a shared
machine during the comparison hits both (measured: one window at 1 thread
and the next at 2, taken sequentially while another process started, made
1 thread look faster). A window is the median rate of ``window`` batches.
The tuner is fed the time each batch *finished decoding* (not when the
consumer took it: prefetched batches would look instantly fast) and measures
only intervals that start after the last change of count, skipping
``settle`` more (a batch begun under the previous count). It climbs while B's
mean over its two windows beats A's last two by ``min_gain``, and otherwise
keeps A (the step back). When the consumer is slower than the decoders,
batches finish at its pace, no step gains, and the tuner keeps the fewest
threads that keep up.

Pure logic: ``observe(samples, finished)`` per batch, ``threads`` to apply.
The loader applies it with a ``ThreadGate`` over a pool of ``max_threads``.
"""

from __future__ import annotations

import os
import statistics
import threading
from dataclasses import dataclass, field
from typing import Any


def thread_budget(cpu_budget: float | int | None, cores: int | None = None) -> int:
    """Threads the loader may use: ``cpu_budget`` cores (an int), or that share of the cores (a float in
    (0, 1]); None leaves one core to the training process. At least 1."""
    cores = cores or os.cpu_count() or 1
    if cpu_budget is None:
        return max(1, cores - 1)
    if isinstance(cpu_budget, float):
        return max(1, int(cores * cpu_budget))
    return max(1, int(cpu_budget))


def ladder(max_threads: int) -> list[int]:
    """Thread counts to try, rising by about 1.5x: 1, 2, 3, 4, 6, 8, 12, 16, 24, ... and ``max_threads``."""
    counts = sorted({1, 2, 3} | {base << k for base in (2, 3) for k in range(1, max_threads.bit_length())})
    return [c for c in counts if c < max_threads] + [max_threads]


@dataclass
class ThreadTuner:
    """Hill-climbing over ``ladder(max_threads)``; ``done`` once it has chosen ``threads``."""

    max_threads: int
    settle: int = 1  # batches skipped after each change
    window: int = 3  # batches measured per count
    min_gain: float = 0.05  # a step must beat the previous count's rate by this share to be kept
    trials: list[tuple[int, float]] = field(default_factory=list)  # (threads, median img/s) measured

    def __post_init__(self) -> None:
        if self.max_threads < 1 or self.window < 1 or self.settle < 0:
            raise ValueError("max_threads and window must be >= 1, settle >= 0")
        self._counts = ladder(self.max_threads)
        self._index = 0  # the count in use (A) on the ladder
        self._queue = [self._counts[0]]  # counts still to measure in this comparison, in order
        self._windows: dict[int, list[float]] = {}
        self.threads = self._counts[0]
        self.done = len(self._counts) == 1
        self._rates: list[float] = []
        self._skip = self.settle
        self._last: float | None = None  # when the previous batch finished
        self._carry = 0  # samples of batches that finished before the previous one (out of order)
        self._changed = float("-inf")  # when the count last changed

    def restart(self) -> None:
        """A pause in the stream (a new epoch): measure from the next batch on, after ``settle`` more."""
        self._last, self._carry, self._skip = None, 0, self.settle

    def observe(self, samples: int, finished: float, now: float | None = None) -> int:
        """A batch of ``samples`` finished decoding at ``finished`` (perf_counter seconds); ``now`` is when a
        new count would take effect (default ``finished``). Returns the thread count to use from now on."""
        if self.done:
            return self.threads
        previous = self._last
        if previous is not None and finished <= previous:
            self._carry += samples  # counted with the next interval
            return self.threads
        self._last, samples, self._carry = finished, samples + self._carry, 0
        if previous is None or previous < self._changed:
            return self.threads  # the interval straddles a change of count or a pause
        if self._skip:
            self._skip -= 1
            return self.threads
        self._rates.append(samples / (finished - previous))
        if len(self._rates) < self.window:
            return self.threads
        rate = statistics.median(self._rates)
        self.trials.append((self.threads, rate))
        self._windows.setdefault(self.threads, []).append(rate)
        self._rates, self._skip = [], self.settle
        self._queue.pop(0)
        if not self._queue:
            self._decide()
        if not self.done and self._queue[0] != self.threads:
            self.threads = self._queue[0]
            self._changed = finished if now is None else now
        return self.threads

    def _decide(self) -> None:
        """A comparison is measured: climb to B, or keep A; then queue the next comparison."""
        a = self._counts[self._index]
        if self._index + 1 < len(self._counts) and len(self._windows) > 1:
            b = self._counts[self._index + 1]
            mean = lambda rates: sum(rates[-2:]) / len(rates[-2:])  # noqa: E731
            if mean(self._windows[b]) < mean(self._windows[a]) * (1 + self.min_gain):
                self.threads, self.done = a, True  # no gain: step back
                return
            self._index += 1
            a = b
        if self._index + 1 == len(self._counts):
            self.threads, self.done = a, True  # gained up to the top of the budget
            return
        b = self._counts[self._index + 1]
        self._queue = [b, a, b]

    def as_dict(self) -> dict[str, Any]:
        return {"max_threads": self.max_threads, "chosen": self.threads if self.done else None,
                "current": self.threads, "trials": [{"threads": t, "img_s": r} for t, r in self.trials]}


class ThreadGate:
    """At most ``limit`` holders at once; the limit can change while threads wait (``with gate: ...``)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._held = 0
        self._cond = threading.Condition()

    @property
    def limit(self) -> int:
        return self._limit

    def set_limit(self, limit: int) -> None:
        with self._cond:
            self._limit = max(1, limit)
            self._cond.notify_all()

    def __enter__(self) -> "ThreadGate":
        with self._cond:
            while self._held >= self._limit:
                self._cond.wait()
            self._held += 1
        return self

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._held -= 1
            self._cond.notify()
