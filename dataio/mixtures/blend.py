"""Which source each sample of a blended stream comes from: within one sample of its share at every prefix.

Megatron's ``build_blending_indices`` gives each position to the source most
behind its target. That is exact on average but not at every prefix: over random
blends of 2-7 sources it drifts up to 1.17 samples from a target (measured,
``tests/sampling/test_blend.py``). Tijdeman's chairman assignment rule (Discrete
Math. 1980) bounds the drift by ``1 - 1/(2K-2)`` for K sources, also when the
weights change at every position: a source is *eligible* at position ``n`` once it
is owed at least ``c = 1/(2K-2)`` more than it got, and among the eligible ones the
position goes to the one whose *deadline* (when it would be owed ``1 - c`` more)
comes first. Ties go to the lower source index, so the sequence is a pure function
of the schedule and the counts so far: a resume or another rank computes the same.

``blend(schedule, start, count, counts)`` continues a stream from position
``start`` with ``counts[i]`` samples already taken from each source.
"""

from __future__ import annotations

import heapq

import numpy as np

from dataio.formats.fallback_log import warn_once
from dataio.mixtures.weight_schedule import MAX_POSITION, NEVER, Targets, WeightSchedule

try:  # the same loop in C (dataio/mixtures/_blend.c), ~100x faster; optional like the other extensions
    from dataio.mixtures import _blend
except ImportError:  # reported by check_install, and once per process when a mixture is blended
    _blend = None

WITHOUT_EXTENSION = ("mixture blend: dataio.mixtures._blend is not built, so mixtures blend in Python "
                     "(~5-8 us a position instead of 0.06: seconds for an epoch of a million samples)")


def slack(num_sources: int) -> float:
    """Tijdeman's ``c``: eligibility threshold, and the bound ``1 - c`` on the drift."""
    return 1.0 / (2 * num_sources - 2) if num_sources > 1 else 0.0


def blend(schedule: WeightSchedule, start: int, count: int,
          counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The sources of positions ``start .. start + count - 1``: int32 ``(count,)``, and the counts after them.

    ``counts``: samples each source got before ``start`` (zeros when None: a
    stream that starts at ``start``).
    """
    k = len(schedule.names)
    if not 0 <= start <= start + count <= MAX_POSITION:  # the int64 arithmetic of the search stays below NEVER
        raise ValueError(f"positions {start}..{start + count} are not within 0..{MAX_POSITION:,}")
    taken = np.zeros(k, dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64).copy()
    if len(taken) != k:
        raise ValueError(f"counts has {len(taken)} entries for {k} sources")
    out = np.empty(count, dtype=np.int32)
    if k == 1:
        out[:] = 0
        taken[0] += count
        return out, taken
    if _blend is not None:
        positions, weights, owed = schedule.arrays()
        _blend.run(positions, np.ascontiguousarray(weights), np.ascontiguousarray(owed), schedule.linear,
                   int(start), int(count), taken, out)
        return out, taken
    warn_once("blend", WITHOUT_EXTENSION)
    return _blend_python(schedule, start, count, taken, out)


def _blend_python(schedule: WeightSchedule, start: int, count: int, taken: np.ndarray,
                  out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The reference implementation of ``blend`` (the C loop computes the same, operation for operation)."""
    k = len(taken)
    targets = Targets(schedule)
    c = slack(k)
    pending: list[tuple[int, int]] = []  # (release, source): not yet owed c more than it got
    eligible: list[tuple[int, int]] = []  # (deadline, source)

    def plan(i: int, now: int) -> None:  # release and deadline of source i's next sample, from position now
        heapq.heappush(pending, (targets.first_reaching(i, taken[i] + c, now), i))

    for i in range(k):
        plan(i, start + 1)
    for index in range(count):
        n = start + index + 1  # the stream's length once this position is given
        while pending and pending[0][0] <= n:
            _, i = heapq.heappop(pending)
            heapq.heappush(eligible, (targets.first_reaching(i, taken[i] + 1 - c, n), i))
        if eligible:
            _, i = heapq.heappop(eligible)
        else:  # only float rounding at a tie can leave none eligible: the next to be released
            _, i = heapq.heappop(pending)
            if _ >= NEVER:
                raise ValueError(f"position {n - 1}: every source has weight 0 from here on")
        out[index] = i
        taken[i] += 1
        plan(i, n)
    return out, taken
