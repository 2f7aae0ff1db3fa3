"""The epochs of a mixture: which sample of which source each position of the blended stream reads.

The stream runs across epochs: ``blend`` gives each position a source, within one
sample of the schedule's share at every prefix, and source ``s``'s ``k``-th draw of
the whole run is item ``k % size`` of its pass ``k // size``, a permutation seeded by
(seed, the source's name, pass) with ``partition.epoch_order``'s shard-local shuffle.
So each source is read in its own shuffled passes without repeats inside a pass; a
small source starts a new pass (a new order) while a large one continues, also
across epoch boundaries; and a source added or renamed changes no other source's
order.

An epoch is a span of the stream, set by ``EpochRule``: a number of samples; or
until a named source finishes a pass; or until every source has finished one
(epoch ``e`` ends when each has finished ``e + 1`` passes). Everything is a pure
function of (sources, schedule, seed, rule, epoch): ranks and resumes compute the
same order, which ``partition.rank_share`` then deals as for a single source.
"""

from __future__ import annotations

import numbers
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dataio.formats.shown import shown
from dataio.sampling import partition
from dataio.mixtures.blend import blend
from dataio.mixtures.weight_schedule import Targets, WeightSchedule

BLOCK = 1 << 16  # positions blended at a time while looking for an epoch's end
MAX_EPOCH = 1 << 31  # an epoch is held as an int64 order (16 GB at this length): a rule needing more is refused


@dataclass(frozen=True, kw_only=True)
class EpochRule:
    """How long an epoch of a mixture is: ``samples`` positions, or ``until`` a source (or "all") ends a pass."""

    samples: int | None = None
    until: str | None = None

    def __post_init__(self) -> None:
        if (self.samples is None) == (self.until is None):
            raise ValueError("give one of samples (a number of samples per epoch) or until (a source name, or "
                             "'all')")
        if self.samples is not None and not _whole_in(self.samples, 1, MAX_EPOCH):
            raise ValueError(f"samples must be >= 1 and at most {MAX_EPOCH:,} (an integer: an epoch is held in "
                             f"memory), got {shown(self.samples)}")

    def describe(self) -> str:
        if self.samples is not None:
            return f"{self.samples} samples"
        return "every source finishes a pass" if self.until == "all" else f"source {self.until!r} finishes a pass"


def _whole_in(value: object, low: int, high: int) -> bool:
    """Whether ``value`` is an integer (numpy's too, not a bool) in ``low..high``."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and low <= value <= high


@dataclass(frozen=True)
class EpochSpan:
    """Positions ``start .. stop - 1`` of the stream, and the draws of each source before ``start``."""

    start: int
    stop: int
    counts_before: tuple[int, ...]


class MixturePlan:
    """The sources (names and the shard of each sample), schedule, seed and epoch rule of a mixture."""

    def __init__(self, sources: dict[str, np.ndarray | int], schedule: WeightSchedule, *, seed: int,
                 rule: EpochRule, shuffle: bool = True, window: int = partition.DEFAULT_WINDOW,
                 pass_length: Callable[[int, int], int] | None = None) -> None:
        """``sources``: each source's sample shards (or its size). The blend's unit is a sample, or with
        ``pass_length(source, pass)`` another unit (a batch of a source's own plan), that many per pass."""
        if tuple(sources) != schedule.names:
            raise ValueError(f"sources {list(sources)} and the schedule's names {list(schedule.names)} differ")
        self.names = schedule.names
        self.shards = [np.zeros(int(s), dtype=np.int64) if isinstance(s, (int, np.integer)) else np.asarray(s)
                       for s in sources.values()]
        self.sizes = np.array([len(s) for s in self.shards], dtype=np.int64)
        for name, size in zip(self.names, self.sizes, strict=True):
            if size < 1:
                raise ValueError(f"source {name!r} holds no samples")
        if rule.until is not None and rule.until != "all" and rule.until not in self.names:
            raise ValueError(f"until: {rule.until!r} is not a source ({', '.join(self.names)}) or 'all'")
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self.schedule, self.seed, self.rule = schedule, seed, rule
        self.shuffle, self.window = shuffle, window
        self._pass_length = pass_length or (lambda source, number: int(self.sizes[source]))
        self._bounds: list[list[int]] = [[0] for _ in self.names]  # units before each pass, per source
        self._spans: list[EpochSpan] = []  # epochs 0.. computed so far
        self._orders: dict[int, np.ndarray] = {}  # the last epoch's order

    # -- spans -----------------------------------------------------------------------------------------------
    def span(self, epoch: int) -> EpochSpan:
        """Where epoch ``epoch`` lies in the stream (the epochs before it are blended once, then remembered)."""
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        while len(self._spans) <= epoch:
            previous = self._spans[-1] if self._spans else None
            start = previous.stop if previous else 0
            counts = self._counts_at(previous) if previous else np.zeros(len(self.names), dtype=np.int64)
            self._spans.append(EpochSpan(start, self._end(len(self._spans), start, counts), tuple(counts.tolist())))
        return self._spans[epoch]

    def _counts_at(self, span: EpochSpan) -> np.ndarray:
        _, counts = blend(self.schedule, span.start, span.stop - span.start, np.array(span.counts_before))
        return counts

    def _end(self, epoch: int, start: int, counts: np.ndarray) -> int:
        """The position after the epoch's last sample."""
        if self.rule.samples is not None:
            return start + int(self.rule.samples)
        goal = np.array([self.units_before(i, epoch + 1) for i in range(len(self.names))], dtype=np.int64)
        watched = np.ones(len(self.names), dtype=bool) if self.rule.until == "all" else \
            np.array([n == self.rule.until for n in self.names])
        reach = Targets(self.schedule)
        for i in np.flatnonzero(watched & (counts < goal)):  # owed its goal (less the blend's slack) when?
            if reach.first_reaching(int(i), float(goal[i]) - 1, start) - start > MAX_EPOCH:
                raise ValueError(f"epoch {epoch} until {self.rule.describe()} would be longer than {MAX_EPOCH} "
                                 f"samples: source {self.names[i]!r} weighs (nearly) 0; give the epoch length in "
                                 "samples")
        position = start
        while True:
            missing = np.where(watched, goal - counts, 0)
            if (missing <= 0).all():
                return position
            sources, after = blend(self.schedule, position, BLOCK, counts)
            if ((after >= goal) | ~watched).all():  # the last watched source's goal falls in this block
                return position + max(int(np.flatnonzero(sources == i)[m - 1]) + 1
                                      for i, m in enumerate(missing.tolist()) if m > 0)
            position, counts = position + BLOCK, after

    # -- orders ------------------------------------------------------------------------------------------------
    def order(self, epoch: int) -> np.ndarray:
        """The epoch's samples in stream order, as ids into the sources laid end to end (``offsets``)."""
        if epoch not in self._orders:
            sources, items = self.draws(epoch)
            self._orders = {epoch: self.offsets[sources] + items}
        return self._orders[epoch]

    def draws(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """(the source of each position of the epoch, the sample of that source it reads)."""
        sources, passes, within = self.units(epoch)
        items = np.empty(len(sources), dtype=np.int64)
        for i in range(len(self.names)):
            where = np.flatnonzero(sources == i)
            if not len(where):  # not drawn this epoch: a weight of 0, or one too small to come up
                continue
            numbers = passes[where]  # non-decreasing: a source's draws run through its passes in turn
            # one slice per pass, not a mask over the epoch per pass (a 100-sample source at weight 0.1 runs
            # 1,280 passes in an ImageNet epoch: 4.2 s an epoch with masks)
            cuts = np.concatenate([[0], np.flatnonzero(np.diff(numbers)) + 1, [len(where)]])
            for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
                at = where[lo:hi]
                items[at] = self.pass_order(i, int(numbers[lo]))[within[at]]
        return sources, items

    def units(self, epoch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the source of each position of the epoch, the pass of that source, the unit within the pass)."""
        span = self.span(epoch)
        counts = np.array(span.counts_before, dtype=np.int64)
        sources, _ = blend(self.schedule, span.start, span.stop - span.start, counts)
        passes = np.empty(len(sources), dtype=np.int64)
        within = np.empty(len(sources), dtype=np.int64)
        for i in range(len(self.names)):
            where = np.flatnonzero(sources == i)
            draw = counts[i] + np.arange(len(where), dtype=np.int64)  # the run's draw numbers of source i
            if len(draw):
                bounds = self._bounds_up_to(i, int(draw[-1]))
                number = np.searchsorted(bounds, draw, side="right") - 1
                passes[where], within[where] = number, draw - bounds[number]
        return sources, passes, within

    def units_before(self, source: int, number: int) -> int:
        """Units of ``source`` in its passes before pass ``number``."""
        bounds = self._bounds[source]
        while len(bounds) <= number:
            length = self._pass_length(source, len(bounds) - 1)
            if length < 1:
                raise ValueError(f"source {self.names[source]!r}: pass {len(bounds) - 1} holds nothing")
            bounds.append(bounds[-1] + length)
        return bounds[number]

    def _bounds_up_to(self, source: int, draw: int) -> np.ndarray:
        """The pass bounds of ``source`` far enough to hold draw number ``draw``."""
        bounds = self._bounds[source]
        while bounds[-1] <= draw:
            self.units_before(source, len(bounds))
        return np.array(bounds, dtype=np.int64)

    def pass_order(self, source: int, number: int) -> np.ndarray:
        """The order of pass ``number`` of ``source`` (seeded by the seed, the source's name and the pass)."""
        name_seed = zlib.crc32(self.names[source].encode())
        return partition.epoch_order(self.shards[source], seed=self.seed * 1_000_003 + name_seed, epoch=number,
                                     shuffle=self.shuffle, window=self.window)

    def counts(self, epoch: int, consumed: int) -> dict[str, dict[str, int]]:
        """Per source: samples drawn in ``epoch``'s first ``consumed`` positions, and passes finished by then."""
        span = self.span(epoch)
        sources, _ = blend(self.schedule, span.start, consumed, np.array(span.counts_before))
        drawn = np.bincount(sources, minlength=len(self.names))
        total = np.array(span.counts_before) + drawn
        passes = [int(np.searchsorted(self._bounds_up_to(i, int(total[i])), total[i], side="right")) - 1
                  for i in range(len(self.names))]
        return {name: {"drawn": int(drawn[i]), "passes": passes[i]} for i, name in enumerate(self.names)}
