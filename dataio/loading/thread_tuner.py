"""``num_workers="auto"``: pick the decode thread count by measuring throughput over the first batches.

The tuner climbs a ladder of thread counts (1, 2, 3, 4, 6, 8, 12, ... up to
the budget). It is fed the time each batch *finished decoding* (not when the
consumer took it: prefetched batches would look instantly fast), and measures
only intervals that start after the last change of count, skipping ``settle``
more (a batch begun under the previous count); the median rate of the next
``window`` intervals is the count's throughput. It climbs while a step gains
at least ``min_gain`` over the previous one and steps back to the previous
count when it stops gaining (or keeps the top of the budget). The median
makes a batch slowed by another process on a shared machine count for
little; the step back means a count that does not pay for its cores is not
kept. When the consumer is slower than the decoders, batches finish at its
pace, no step gains, and the tuner keeps the fewest threads that keep up.

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
        self._index = 0
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
        self.trials.append((self.threads, statistics.median(self._rates)))
        self._rates, self._skip = [], self.settle
        if len(self.trials) > 1 and self.trials[-1][1] < self.trials[-2][1] * (1 + self.min_gain):
            self.threads, self.done = self.trials[-2][0], True  # no gain: step back
        elif self._index + 1 == len(self._counts):
            self.done = True  # gained up to the top of the budget
        else:
            self._index += 1
            self.threads = self._counts[self._index]
            self._changed = finished if now is None else now
        return self.threads

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
