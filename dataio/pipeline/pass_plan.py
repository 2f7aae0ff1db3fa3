"""This rank's batches in one pass, as the pass driver reads them: pure data, built by the loader's sampling.

Images and any source read by samples deal the epoch's order a sample (or a batch) at a
time (``partition.rank_share``) and cut the share into batches (``partition.batch_bounds``);
text deals whole batches of a global plan (``dataio.text.batch_plans.deal``). Either way
the driver sees the same thing: each batch's ids and padding flags, the positions of the
epoch it covers (what ``state_dict`` counts), and the global position it starts at (what
seeds its augmentation, so a resume on the same world redraws the same crops).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class PassPlan:
    """``len(plan)`` batches; batch ``i`` is ``ids[offsets[i]:offsets[i + 1]]``."""

    ids: np.ndarray  # (M,) int64: sample ids (text: plan rows), batch after batch
    repeated: np.ndarray  # (M,) bool: padding repeats
    offsets: np.ndarray  # (B + 1,) int64: where each batch starts in ``ids``
    units: np.ndarray  # (B,) int64: positions of the epoch's order each batch covers
    steps: np.ndarray  # (B,) int64: the global position each batch starts at (its seed key's step)
    bounds: list[tuple[int, int]] = field(init=False, repr=False, compare=False)
    unit_list: list[int] = field(init=False, repr=False, compare=False)
    step_list: list[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The same as Python ints, for the driver's per-batch lookups (a numpy scalar is ~0.1 us each).
        offsets = self.offsets.tolist()
        object.__setattr__(self, "bounds", list(zip(offsets[:-1], offsets[1:], strict=True)))
        object.__setattr__(self, "unit_list", self.units.tolist())
        object.__setattr__(self, "step_list", self.steps.tolist())

    def __len__(self) -> int:
        return len(self.units)

    def batch(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Batch ``index``'s ids and repeat flags."""
        start, stop = self.offsets[index], self.offsets[index + 1]
        return self.ids[start:stop], self.repeated[start:stop]

    def batch_ids(self) -> list[np.ndarray]:
        """Every batch's ids (``loader.batch_sampler``)."""
        return [self.ids[self.offsets[i]:self.offsets[i + 1]] for i in range(len(self))]


def sample_plan(ids: np.ndarray, repeated: np.ndarray, bounds: list[tuple[int, int]], *, consumed: int,
                world_size: int) -> PassPlan:
    """A plan of batches cut from a rank's share of samples: ``bounds`` over ``ids``; each batch covers its
    samples and starts at the global position ``consumed + world_size * start`` (strided dealing)."""
    starts = np.array([start for start, _ in bounds], dtype=np.int64)
    stops = np.array([stop for _, stop in bounds], dtype=np.int64)
    end = int(stops[-1]) if len(stops) else 0
    offsets = np.concatenate([starts, [end]]) if len(starts) else np.zeros(1, dtype=np.int64)
    return PassPlan(ids[:end], repeated[:end], offsets - (offsets[0] if len(offsets) else 0), stops - starts,
                    consumed + world_size * starts)


def batch_plan(ids: np.ndarray, offsets: np.ndarray, repeated_batches: np.ndarray, *, consumed: int,
               world_size: int) -> PassPlan:
    """A plan of whole batches dealt in turns (text): each covers one position of the global plan; batch ``i`` of
    this rank starts at global batch ``consumed + world_size * i``."""
    counts = np.diff(offsets)
    index = np.arange(len(counts), dtype=np.int64)
    return PassPlan(ids, np.repeat(repeated_batches, counts), offsets, np.ones(len(counts), dtype=np.int64),
                    consumed + world_size * index)
