"""The LR schedule of ``dataio train``: OneCycle's shape as a pure function of (step, total steps).

``OneCycle(peak, total, warmup).lr(step)`` is the LR of the 0-based optimizer
step ``step``: a cosine rise from ``peak / 25`` over the first
``round(warmup * total)`` steps (at most ``total - 1``), the peak at the first
step after it, and a cosine fall to ``peak / 25 / 1e4`` at the last step. Every
total from 1 up is valid: torch's ``OneCycleLR`` divides by zero when
``warmup * total`` is exactly 1 (10 steps at the default 0.1 warm-up), and its
state pins the total, so a finished run could not be given more epochs.

A resumed run re-plans: the curve is recomputed from the new total (more
epochs, another batch size), peak and warm-up, and the run continues from its
saved step. When the plan changed, ``Resumed`` starts at the LR the run last
used and interpolates linearly into the new curve over ``warmup`` x the
remaining steps (at least one): no jump at the resume step, and an extended run that had
annealed to ~0 warms up again. With an unchanged plan the LR is exactly the
uninterrupted run's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

START_DIV = 25.0  # OneCycleLR's div_factor: the warm-up starts at peak / 25
END_DIV = 1e4  # OneCycleLR's final_div_factor: the last step is at peak / 25 / 1e4


def _cosine(start: float, end: float, pct: float) -> float:
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)


@dataclass(frozen=True, kw_only=True)
class OneCycle:
    """Warm-up then cosine annealing over ``total`` steps."""

    peak: float
    total: int
    warmup: float = 0.1

    def __post_init__(self) -> None:
        if not (math.isfinite(self.peak) and self.peak > 0):
            raise ValueError(f"peak must be a finite number > 0, got {self.peak}")
        if self.total < 1:
            raise ValueError(f"total must be >= 1, got {self.total}")
        if not 0 <= self.warmup < 1:
            raise ValueError(f"warmup must be in [0, 1), got {self.warmup}")

    @property
    def warmup_steps(self) -> int:
        """Steps before the peak: at most ``total - 1``, so the peak is always reached."""
        return min(self.total - 1, round(self.warmup * self.total))

    def lr(self, step: int) -> float:
        """LR of the 0-based step ``step``; steps past the end stay at the final LR."""
        start, end = self.peak / START_DIV, self.peak / START_DIV / END_DIV
        rise = self.warmup_steps
        step = min(max(step, 0), self.total - 1)
        if step < rise:
            return _cosine(start, self.peak, step / rise)
        fall = self.total - 1 - rise
        return _cosine(self.peak, end, (step - rise) / fall) if fall else self.peak

    def plan(self) -> dict[str, float]:
        return {"peak": self.peak, "total": self.total, "warmup": self.warmup}


@dataclass(frozen=True, kw_only=True)
class Resumed:
    """A curve entered at ``start`` with the LR ``start_lr`` the run last used, blended in over ``ramp`` steps:
    ``start_lr * (1 - k / ramp) + curve.lr(start + k) * k / ramp`` for ``k < ramp``."""

    curve: OneCycle
    start: int
    start_lr: float
    ramp: int

    def lr(self, step: int) -> float:
        target = self.curve.lr(step)
        if step >= self.start + self.ramp:
            return target
        left = 1.0 - max(0, step - self.start) / self.ramp  # 1 at the resume step, 0 once blended in
        return self.start_lr * left + target * (1.0 - left)  # between the two: never above the peak

    @property
    def total(self) -> int:
        return self.curve.total


Schedule = OneCycle | Resumed


def state(schedule: Schedule, step: int) -> dict[str, Any]:
    """What a checkpoint keeps: the plan, the blend (when resumed with another plan) and the LR of the last step."""
    curve = schedule.curve if isinstance(schedule, Resumed) else schedule
    saved: dict[str, Any] = {**curve.plan(), "last_lr": schedule.lr(step - 1) if step > 0 else None}
    if isinstance(schedule, Resumed):
        saved["resumed"] = {"start": schedule.start, "start_lr": schedule.start_lr, "ramp": schedule.ramp}
    return saved


def resume(curve: OneCycle, saved: dict[str, Any] | None, step: int) -> Schedule:
    """The schedule of a run resumed at ``step`` with this invocation's ``curve``.

    The same plan as saved: the saved schedule, unchanged. Another plan: a new
    blend from the LR of the last step. ``saved`` None (a checkpoint written
    before schedules were saved) or no step done yet: the curve.
    """
    if saved is None:
        return curve
    if curve.plan() == {k: saved[k] for k in ("peak", "total", "warmup")}:
        blend = saved.get("resumed")
        if blend is None:
            return curve
        return Resumed(curve=curve, start=int(blend["start"]), start_lr=float(blend["start_lr"]),
                       ramp=int(blend["ramp"]))
    if step <= 0 or saved.get("last_lr") is None:
        return curve
    ramp = max(1, round(curve.warmup * max(0, curve.total - step)))
    return Resumed(curve=curve, start=step, start_lr=float(saved["last_lr"]), ramp=ramp)
