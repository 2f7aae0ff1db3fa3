"""Weights of the sources of a mixture along the blended stream, and the share each source is owed.

A schedule is a list of breakpoints ``(position, weights)``: ``position`` counts
samples of the blended stream from the start of training, the first breakpoint is
at 0, and between two breakpoints the weights are constant (the first point's) or
change linearly, sample by sample, to the next point's. After the last breakpoint
they stay. Weights are normalised at every breakpoint, so at every position they
sum to one.

The share source ``i`` is owed after ``n`` samples is ``T_i(n) = sum_{m < n}
w_i(m)``: piecewise quadratic in ``n``, evaluated in closed form (no array per
position, so an epoch of any length costs nothing to describe), and ``first_reaching``
inverts it. ``dataio.mixtures.blend`` turns these targets into a sequence of sources
that stays within one sample of them at every prefix.
"""

from __future__ import annotations

from itertools import pairwise

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dataio.formats.shown import shown

NEVER = 1 << 62  # first_reaching when a source is not owed that much before it: its weight stays 0, or is tiny
MAX_POSITION = NEVER - 1  # the last breakpoint a schedule holds: past it the int64 arithmetic could overflow


@dataclass(frozen=True, kw_only=True)
class WeightSchedule:
    """Weights of ``names`` at each breakpoint ``points[j] = (position, weights)`` (positions in samples).

    ``WeightSchedule.constant({"web": 0.7, "code": 0.3})`` is a fixed blend;
    ``WeightSchedule(names=..., points=((0, (0.7, 0.3)), (90_000, (0.7, 0.3)), (100_000, (0.3, 0.7))))``
    anneals to 30/70 over samples 90,000 to 100,000 (``interpolation="linear"``).
    """

    names: tuple[str, ...]
    points: tuple[tuple[int, tuple[float, ...]], ...]
    interpolation: Literal["linear", "constant"] = "linear"

    def __post_init__(self) -> None:
        names = tuple(str(n) for n in self.names)
        object.__setattr__(self, "names", names)
        if not names or len(set(names)) != len(names) or not all(names):
            raise ValueError(f"names must be distinct, non-empty source names, got {list(names)}")
        if self.interpolation not in ("linear", "constant"):
            raise ValueError(f"interpolation must be 'linear' or 'constant', got {shown(self.interpolation)}")
        points = tuple((_position(p), tuple(_weight(w) for w in ws)) for p, ws in self.points)
        if not points or points[0][0] != 0:
            raise ValueError("points must start with a breakpoint at position 0")
        for (a, _), (b, _) in pairwise(points):
            if b <= a:
                raise ValueError(f"points must be at increasing positions, got {a} then {b}")
        for position, weights in points:
            if len(weights) != len(names):
                raise ValueError(f"points: the breakpoint at {position} has {len(weights)} weights for "
                                 f"{len(names)} sources")
            if not all(math.isfinite(w) and w >= 0 for w in weights) or sum(weights) <= 0:
                raise ValueError(f"points: the weights at {position} must be finite, >= 0 and not all 0, "
                                 f"got {list(weights)}")
        object.__setattr__(self, "points", tuple((p, _summable(ws)) for p, ws in points))

    @classmethod
    def constant(cls, weights: Mapping[str, float]) -> "WeightSchedule":
        """One blend for the whole run."""
        return cls(names=tuple(weights), points=((0, tuple(weights.values())),), interpolation="constant")

    @classmethod
    def of(cls, weights: Mapping[str, float] | Sequence[tuple[int, Mapping[str, float]]],
           interpolation: Literal["linear", "constant"] = "linear") -> "WeightSchedule":
        """From ``{name: weight}`` or ``[(position, {name: weight}), ...]`` (a name left out weighs 0)."""
        if isinstance(weights, Mapping):
            return cls.constant(weights)
        names: list[str] = []
        for point in weights:
            if not (isinstance(point, Sequence) and len(point) == 2 and isinstance(point[1], Mapping)):
                raise ValueError(f"points: a breakpoint is (position, {{name: weight}}), got {shown(point)}")
            names += [n for n in point[1] if n not in names]
        points = tuple((p, tuple(_weight(blend.get(n, 0.0)) for n in names)) for p, blend in weights)
        return cls(names=tuple(names), points=points, interpolation=interpolation)

    # -- the arrays the blend computes with -----------------------------------------------------------
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(breakpoint positions int64 (S,), normalised weights float64 (S, K), owed shares at each (S, K))."""
        positions = np.array([p for p, _ in self.points], dtype=np.int64)
        weights = np.array([w for _, w in self.points], dtype=np.float64)
        weights /= weights.sum(axis=1, keepdims=True)
        owed = np.zeros_like(weights)
        for j in range(1, len(positions)):
            length = float(positions[j] - positions[j - 1])
            owed[j] = owed[j - 1] + _segment_sum(weights[j - 1], weights[j], length, length, self.linear)
        return positions, weights, owed

    @property
    def linear(self) -> bool:
        return self.interpolation == "linear"

    def weights_at(self, position: int) -> np.ndarray:
        """The normalised weights of sample ``position`` of the stream."""
        positions, weights, _ = self.arrays()
        j = int(np.searchsorted(positions, position, side="right")) - 1
        if j + 1 < len(positions) and self.linear:
            t = (position - positions[j]) / (positions[j + 1] - positions[j])
            return weights[j] + (weights[j + 1] - weights[j]) * t
        return weights[j].copy()


def _position(value: object) -> int:
    """A breakpoint's position as an int in 0..MAX_POSITION (past it the blend's int64 arithmetic overflows)."""
    try:
        position = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):  # None, "x", nan, inf
        position = MAX_POSITION + 1
    if position > MAX_POSITION:  # below 0: refused with the order of the breakpoints
        raise ValueError(f"points: a breakpoint's position must be an integer in 0..{MAX_POSITION:,}, got "
                         f"{shown(value)}")
    return position


def _weight(value: object) -> float:
    """A weight as a float; an integer too large for one (10**400) is not finite."""
    try:
        return float(value)  # type: ignore[arg-type]
    except OverflowError:
        return math.inf
    except (TypeError, ValueError):
        raise ValueError(f"points: a weight must be a number, got {shown(value)}") from None


def _summable(weights: tuple[float, ...]) -> tuple[float, ...]:
    """The weights, scaled by the largest where their sum overflows (1e308 twice): the same blend, a finite sum
    to normalise by (an infinite one made every weight 0). Weights that sum fine are kept as given, bit for bit."""
    if math.isfinite(sum(weights)):
        return weights
    largest = max(weights)
    return tuple(w / largest for w in weights)


def _segment_sum(start: np.ndarray | float, stop: np.ndarray | float, length: float, count: float,
                 linear: bool) -> np.ndarray | float:
    """Sum of the weights of the first ``count`` samples of a segment of ``length`` from ``start`` to ``stop``."""
    if not linear:
        return count * start
    return count * start + (stop - start) * (count * (count - 1) / 2) / length


class Targets:
    """``owed(i, n)`` and its inverse ``first_reaching(i, x, lo)`` for one schedule (the blend's inner loop)."""

    def __init__(self, schedule: WeightSchedule) -> None:
        self.positions, self.weights, self.owed_at = schedule.arrays()
        self.linear = schedule.linear
        self.last = len(self.positions) - 1
        # the last segment from which a source's weight stays 0: beyond it nothing more is owed
        self.final_zero = self.weights[-1] == 0

    def owed(self, i: int, n: int) -> float:
        """``T_i(n)``: the samples source ``i`` is owed after ``n`` samples of the stream."""
        positions = self.positions
        j = self.last if n >= positions[self.last] else int(np.searchsorted(positions, n, side="right")) - 1
        d = float(n - positions[j])
        if j == self.last:
            return float(self.owed_at[j, i] + d * self.weights[j, i])
        length = float(positions[j + 1] - positions[j])
        return float(self.owed_at[j, i] + _segment_sum(self.weights[j, i], self.weights[j + 1, i], length, d,
                                                       self.linear))

    def first_reaching(self, i: int, x: float, lo: int) -> int:
        """The least ``n >= lo`` with ``owed(i, n) >= x``, or ``NEVER``."""
        if self.owed(i, lo) >= x:
            return lo
        if self.final_zero[i] and self.owed(i, max(lo, int(self.positions[self.last]))) < x:
            return NEVER
        step = 1
        hi = lo + step
        while self.owed(i, hi) < x:  # gallop: the answer is near lo in the common case
            if hi >= NEVER:  # a weight so small (1e-30) that the stream ends first: never (and no int64 overflow)
                return NEVER
            lo = hi
            step *= 2
            hi = lo + step if step < NEVER - lo else NEVER
        while hi - lo > 1:  # owed(lo) < x <= owed(hi)
            mid = (lo + hi) // 2
            if self.owed(i, mid) >= x:
                hi = mid
            else:
                lo = mid
        return hi
