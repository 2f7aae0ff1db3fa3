"""``loader.stats``: the error counts of ``ErrorStats`` plus where the time went, per epoch, and the threads.

``stages`` holds thread-seconds per stage (``dataio.pipeline.stage_times``);
``threads`` what ``num_workers="auto"`` measured and chose (``ThreadTuner``),
or the fixed count. Both loaders use it, so ``as_dict`` keeps the error
fields where they were and adds ``stages`` and ``threads``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dataio.pipeline.error_policy import ErrorStats
from dataio.pipeline.stage_times import StageTimes
from dataio.pipeline.thread_tuner import ThreadTuner


@dataclass
class LoaderStats(ErrorStats):
    """Errors (as ``ErrorStats``), stage times per epoch, and the decode threads in use."""

    stages: StageTimes = field(default_factory=StageTimes)
    fixed_threads: int | None = None  # a fixed num_workers; None with a tuner
    tuner: ThreadTuner | None = None
    sources: "SourceCounts | dict" = field(default_factory=dict)  # a mixture: per source samples (and tokens)

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
        out = {**super().as_dict(), "stages": self.stages.as_dict(), "threads": self.threads}
        if self.sources:
            out["sources"] = {name: dict(counts) for name, counts in self.sources.items()}
        return out


class SourceCounts(Mapping):
    """A mixture's units read per source: ``{"web": {"samples": n, "tokens": t}, ...}`` (text), or
    ``{"imagenet": {"samples": n}, ...}`` (images: ``units=("samples",)``).

    Counted into one int64 array per batch (one addition per unit), read as a mapping: a dict updated per batch
    cost 25-70 us a batch in Python, a tenth of a budget batch's whole time on this VM.
    """

    def __init__(self, names: tuple[str, ...], units: tuple[str, ...] = ("samples", "tokens")) -> None:
        self.names, self.units = names, units
        self.counts = np.zeros((len(names), len(units)), dtype=np.int64)

    def add(self, *counts: np.ndarray) -> None:
        """One array per unit, one entry per source."""
        for column, values in enumerate(counts):
            self.counts[:, column] += values.astype(np.int64)  # bincount with weights counts in float64

    def add_one(self, source: int, samples: int, tokens: int) -> None:
        """A batch of one source (bucket and budget mixtures): two scalar additions."""
        self.counts[source, 0] += samples
        self.counts[source, 1] += tokens

    def __getitem__(self, name: str) -> dict[str, int]:
        row = self.counts[self.names.index(name)]
        return {unit: int(value) for unit, value in zip(self.units, row, strict=True)}

    def __iter__(self) -> Iterator[str]:
        return iter(name for name, row in zip(self.names, self.counts, strict=True) if row.any())

    def __len__(self) -> int:
        return int(self.counts.any(axis=1).sum())

    def __repr__(self) -> str:
        return repr({name: self[name] for name in self})
