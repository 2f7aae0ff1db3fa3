"""``loader.stats``: the error counts of ``ErrorStats`` plus where the time went, per epoch, and the threads.

``stages`` holds thread-seconds per stage (``dataio.loading.stage_times``);
``threads`` what ``num_workers="auto"`` measured and chose (``ThreadTuner``),
or the fixed count. Both loaders use it, so ``as_dict`` keeps the error
fields where they were and adds ``stages`` and ``threads``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dataio.loading.error_policy import ErrorStats
from dataio.loading.stage_times import StageTimes
from dataio.loading.thread_tuner import ThreadTuner


@dataclass
class LoaderStats(ErrorStats):
    """Errors (as ``ErrorStats``), stage times per epoch, and the decode threads in use."""

    stages: StageTimes = field(default_factory=StageTimes)
    fixed_threads: int | None = None  # a fixed num_workers; None with a tuner
    tuner: ThreadTuner | None = None

    @property
    def threads(self) -> dict[str, Any]:
        """``{"mode": "fixed"|"auto", "chosen": n, ...}``: the count chosen by auto once it has settled."""
        if self.tuner is None:
            return {"mode": "fixed", "chosen": self.fixed_threads}
        return {"mode": "auto", **self.tuner.as_dict()}

    def breakdown(self, epoch: int | None = None) -> dict[str, float]:
        """Seconds per stage in ``epoch`` (default: the current one)."""
        return self.stages.seconds(epoch)

    def as_dict(self) -> dict[str, object]:
        return {**super().as_dict(), "stages": self.stages.as_dict(), "threads": self.threads}
