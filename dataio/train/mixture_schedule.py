"""A mixture's blend in the trainer's terms, and where its breakpoints fall in the loader's units.

``dataio train`` takes a schedule whose breakpoints are fractions of the
planned run (``"90%"``, ``0.9``) or optimizer steps (``4500``), and turns it
into the loader's ``WeightSchedule``, whose positions count the loader's
units: batches in bucket/budget mode, samples (images, fixed text), documents
(packed text). ``RunUnits`` holds what the conversion needs:

- a fraction ``f`` falls at unit ``round(f x epochs x N)``, ``N`` the units in
  an epoch (``epoch_length``, or one pass of every source): exact, as the
  loader's epochs are ``N`` units each;
- step ``s`` falls at ``e x N + min(round(k x u), N)`` with ``e, k =
  divmod(s, S)``, ``u`` the units a step reads (``world_size`` batches, or
  ``world_size x batch_size`` samples) and ``S = ceil(N / u)`` the steps of an
  epoch (its last one may read fewer). Packed rows hold a varying number of
  documents, so there ``u = world_size x batch_size x block_size / the mean
  document length``: approximate, where fractions stay exact;
- with ``epoch_until`` an epoch's length depends on the blend itself, so
  fractions are refused and step ``s`` falls at ``round(s x u)``.

Before the first breakpoint the weights are the first's (``[("90%", A), ("100%", B)]``
holds A, then moves to B over the last tenth); after the last they stay.
"""

from __future__ import annotations

from itertools import pairwise

import math
import re
from fractions import Fraction
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dataio.formats.shown import shown
from dataio.mixtures.weight_schedule import MAX_POSITION, WeightSchedule

_PERCENT = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*%\s*")


@dataclass(frozen=True)
class At:
    """Where a breakpoint falls: a ``fraction`` of the planned run (0..1), or an optimizer ``step``."""

    fraction: float | None = None
    step: int | None = None

    def __post_init__(self) -> None:
        if (self.fraction is None) == (self.step is None):
            raise ValueError("a breakpoint is a fraction of training or a step, not both")
        if self.fraction is not None and not 0 <= self.fraction <= 1:
            raise ValueError(f"a breakpoint's fraction must be in [0, 1] (0% to 100%; a step is an integer), got "
                             f"{self.fraction}")
        if self.step is not None and not 0 <= self.step <= MAX_POSITION:
            raise ValueError(f"a breakpoint's step must be >= 0 and at most {MAX_POSITION:,}, got {shown(self.step)}")

    @classmethod
    def parse(cls, value: Any) -> "At":
        """``"90%"`` or a float in [0, 1]: a fraction of training; an int >= 0: a step."""
        if isinstance(value, At):
            return value
        if isinstance(value, str):
            match = _PERCENT.fullmatch(value)
            if not match:
                raise ValueError(f"a breakpoint is 'N%', a fraction in [0, 1] or a step, got {shown(value)}")
            return cls(fraction=float(match.group(1)) / 100)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"a breakpoint is 'N%', a fraction in [0, 1] or a step, got {shown(value)}")
        if isinstance(value, int):
            return cls(step=value)
        if not math.isfinite(value):
            raise ValueError(f"a breakpoint's fraction must be in [0, 1], got {value}")
        return cls(fraction=float(value))

    def describe(self) -> str:
        return f"{self.fraction * 100:g}%" if self.fraction is not None else f"step {self.step}"


def _float(weight: Any) -> float:
    """A weight as a float; an integer too large for one (10**400) is not finite (refused with the others)."""
    try:
        return float(weight)
    except OverflowError:
        return math.inf


@dataclass(frozen=True, kw_only=True)
class RunSchedule:
    """Weights of ``names`` at breakpoints ``points[j] = (At, weights)``; ``interpolation`` as ``WeightSchedule``."""

    names: tuple[str, ...]
    points: tuple[tuple[At, tuple[float, ...]], ...]
    interpolation: Literal["linear", "constant"] = "linear"

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(str(n) for n in self.names))
        if not self.names or len(set(self.names)) != len(self.names) or not all(self.names):
            raise ValueError(f"weights: the sources must be distinct, non-empty names, got {list(self.names)}")
        if self.interpolation not in ("linear", "constant"):
            raise ValueError(f"weights: interpolation must be 'linear' or 'constant', got {shown(self.interpolation)}")
        if not self.points:
            raise ValueError("weights: give at least one blend")
        points = tuple((At.parse(at), tuple(_float(w) for w in ws)) for at, ws in self.points)
        object.__setattr__(self, "points", points)
        for at, weights in points:
            if len(weights) != len(self.names):
                raise ValueError(f"weights at {at.describe()}: {len(weights)} weights for {len(self.names)} sources")
            bad = [f"{n}={w:g}" for n, w in zip(self.names, weights, strict=True) if not (math.isfinite(w) and w >= 0)]
            if bad:
                raise ValueError(f"weights at {at.describe()}: a weight must be a finite number >= 0, got "
                                 f"{', '.join(bad)}")
            if sum(weights) <= 0:
                raise ValueError(f"weights at {at.describe()}: every weight is 0")
        for kind in ("fraction", "step"):
            values = [getattr(at, kind) for at, _ in points if getattr(at, kind) is not None]
            if any(b <= a for a, b in pairwise(values)):
                raise ValueError(f"weights: breakpoints given as {kind}s must increase, got "
                                 f"{', '.join(at.describe() for at, _ in points if getattr(at, kind) is not None)}")
        never = [n for i, n in enumerate(self.names) if all(ws[i] == 0 for _, ws in points)]
        if never:
            raise ValueError(f"weights: source(s) {', '.join(never)} weigh 0 at every breakpoint: leave them out")

    @classmethod
    def of(cls, weights: Any, names: Sequence[str],
           interpolation: Literal["linear", "constant"] = "linear") -> "RunSchedule":
        """From ``{name: weight}`` (one blend for the run) or ``[(at, {name: weight}), ...]``, over the sources
        ``names`` (a source a breakpoint leaves out weighs 0 there; a name that is not a source is refused)."""
        if isinstance(weights, RunSchedule):
            blends: list[tuple[Any, Mapping[str, Any]]] = [(at, dict(zip(weights.names, ws, strict=True)))
                                                           for at, ws in weights.points]
            interpolation = weights.interpolation
        elif isinstance(weights, Mapping):
            blends = [(At(step=0), weights)]
        elif isinstance(weights, Sequence) and not isinstance(weights, str):
            blends = []
            for i, point in enumerate(weights):
                if not (isinstance(point, Sequence) and len(point) == 2 and isinstance(point[1], Mapping)):
                    raise ValueError(f"weights[{i}]: a breakpoint is (at, {{name: weight}}), got {shown(point)}")
                blends.append((point[0], point[1]))
        else:
            raise ValueError(f"weights must be {{name: weight}} or [(at, {{name: weight}}), ...], got "
                             f"{shown(weights)}")
        names = tuple(str(n) for n in names)
        points = []
        for at, blend in blends:
            at = At.parse(at)
            unknown = [str(n) for n in blend if str(n) not in names]
            if unknown:
                raise ValueError(f"weights at {at.describe()}: {', '.join(map(repr, unknown))} "
                                 f"{'is not a source' if len(unknown) == 1 else 'are not sources'} "
                                 f"({', '.join(names)})")
            values = {str(n): w for n, w in blend.items()}
            for name, w in values.items():
                if isinstance(w, bool) or not isinstance(w, (int, float)):
                    raise ValueError(f"weights at {at.describe()}: {name}'s weight must be a number, got {shown(w)}")
            points.append((at, tuple(_float(values.get(n, 0.0)) for n in names)))
        return cls(names=names, points=tuple(points), interpolation=interpolation)

    @property
    def constant(self) -> bool:
        """One blend for the whole run (nothing to place)."""
        return len(self.points) == 1

    @property
    def uses_fractions(self) -> bool:
        return any(at.fraction is not None for at, _ in self.points)

    def first_blend(self) -> dict[str, float]:
        return dict(zip(self.names, self.points[0][1], strict=True))

    def resolve(self, run: "RunUnits") -> WeightSchedule:
        """The loader's schedule: each breakpoint at its unit of ``run`` (see the module docstring)."""
        if self.constant:
            return WeightSchedule.constant(self.first_blend())
        placed = [(run.position(at), at, weights) for at, weights in self.points]
        for (a, at_a, _), (b, at_b, _) in pairwise(placed):
            if b <= a:
                raise ValueError(f"weights: breakpoints {at_a.describe()} and {at_b.describe()} fall at units {a} "
                                 f"and {b} of the run ({run.describe()}): each must come after the one before")
        points = [(position, weights) for position, _, weights in placed]
        if points[0][0] > 0:  # before the first breakpoint, its weights
            points.insert(0, (0, points[0][1]))
        return WeightSchedule(names=self.names, points=tuple(points), interpolation=self.interpolation)


@dataclass(frozen=True, kw_only=True)
class RunUnits:
    """The planned run in the loader's units: ``epochs`` of ``epoch_units`` (None: epochs end with a source's
    pass), ``per_step`` units read by one optimizer step (all ranks), named ``unit``."""

    epochs: int
    epoch_units: int | None
    per_step: float
    unit: str = "samples"

    def __post_init__(self) -> None:
        if self.epochs < 1 or (self.epoch_units is not None and self.epoch_units < 1):
            raise ValueError(f"a run needs epochs >= 1 and epoch_units >= 1, got {self.epochs}, {self.epoch_units}")
        if not (math.isfinite(self.per_step) and self.per_step > 0):
            raise ValueError(f"per_step must be > 0, got {self.per_step}")

    @property
    def total(self) -> int | None:
        return None if self.epoch_units is None else self.epochs * self.epoch_units

    @property
    def steps_per_epoch(self) -> int | None:
        return None if self.epoch_units is None else max(1, math.ceil(self.epoch_units / self.per_step))

    def position(self, at: At) -> int:
        """The unit of the run at which breakpoint ``at`` falls; ValueError past ``MAX_POSITION``."""
        position = self._position(at)
        if position > MAX_POSITION:
            raise ValueError(f"weights: the breakpoint at {at.describe()} falls past unit {MAX_POSITION:,} of the "
                             f"run ({self.describe()}), the last a schedule holds")
        return position

    def _position(self, at: At) -> int:
        if at.fraction is not None:
            if self.total is None:
                raise ValueError(f"weights: the breakpoint at {at.describe()} is a fraction of training, but with "
                                 "epoch_until an epoch's length depends on the blend: give breakpoints in steps, or "
                                 "the epoch's length with epoch_length")
            try:
                return round(at.fraction * self.total)
            except OverflowError:  # a run of more than 1e308 units: exactly (placed past MAX_POSITION unless 0%)
                return round(Fraction(at.fraction) * self.total)
        assert at.step is not None
        if self.epoch_units is None or self.steps_per_epoch is None:
            return round(at.step * self.per_step)
        epoch, step = divmod(at.step, self.steps_per_epoch)
        return epoch * self.epoch_units + min(round(step * self.per_step), self.epoch_units)

    def describe(self) -> str:
        length = f"{self.epoch_units:,} {self.unit} each" if self.epoch_units else "ending with a source's pass"
        return f"{shown(self.epochs)} epoch(s) {length}, {self.per_step:,.4g} {self.unit} a step"
