"""Text batches under HF Accelerate: every rank's last batch of a pass holds the batch size, and
``gather_for_metrics`` is told how many of the gathered rows are real.

Text deals whole batches of a global plan, so in ``fixed`` and ``pack`` mode the ranks'
last batches differed in rows (the plan's short last batch on one rank, a whole repeated
batch on another): Accelerate's gather of per-row values (ids, per-row losses) then
aborted inside gloo, or, where the shapes happened to match, counted the repeated batch.
While an ``Accelerator`` exists, the batches of the pass's last round are topped up to
the batch size with the epoch's first rows (flagged ``repeated``), as Accelerate's own
``BatchSamplerShard`` completes a short batch, and the pass reports the real rows of that
round as its remainder (``accelerate_pass``), which ``gather_for_metrics`` keeps.
In these two modes only the plan's last batch is short, so the real rows of the round
come first in the gathered order. ``bucket`` and ``budget`` batches vary in rows anywhere
in a pass: nothing is changed there (docs/dataloader.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataio.loader.accelerate_pass import accelerator_live
from dataio.pipeline.pass_plan import PassPlan
from dataio.text.batch_plans import BatchPlan
from dataio.text.config import TextLoaderConfig


class GatheredRows:
    """Mixed in before ``SourceLoader`` by ``TextLoader`` (its config, world, position and ``global_plan``)."""

    config: TextLoaderConfig
    world_size: int
    position: Any

    def global_plan(self, epoch: int | None = None) -> tuple[Any, BatchPlan]:
        raise NotImplementedError

    def _tops_up(self) -> bool:
        """Whether the last round's batches are evened out: fixed-size modes, padded, on several ranks, under
        Accelerate (as the image loaders deal whole batches there)."""
        c = self.config
        return (c.mode in ("fixed", "pack") and self.world_size > 1 and c.even_batches and not c.drop_last
                and accelerator_live())

    def _last_round(self, consumed: int) -> int:
        """The plan position of the first batch of the pass's last round (batches dealt in turns from ``consumed``)."""
        total = len(self.global_plan()[1])
        return consumed + max(total - consumed - 1, 0) // self.world_size * self.world_size

    def _even_rows(self, plan: PassPlan) -> PassPlan:
        """``plan`` with its last-round batches topped up to the batch size by the epoch's first rows, repeated."""
        if not self._tops_up() or not len(plan):
            return plan
        size, first = self.config.batch_size, self.global_plan()[1].samples
        last = self._last_round(self.position.consumed)
        batches, flags = [], []
        for index in range(len(plan)):
            ids, repeated = plan.batch(index)
            filler = first[:size - len(ids)] if plan.steps[index] >= last else first[:0]
            batches.append(np.concatenate([ids, filler]))
            flags.append(np.concatenate([repeated, np.ones(len(filler), dtype=bool)]))
        offsets = np.zeros(len(batches) + 1, dtype=np.int64)
        np.cumsum([len(ids) for ids in batches], out=offsets[1:])
        return PassPlan(np.concatenate(batches).astype(np.int64), np.concatenate(flags), offsets, plan.units,
                        plan.steps)

    def _accelerate_remainder(self, consumed: int) -> int:
        """Real rows of the pass's last round, when it holds a repeat (else 0: nothing to drop)."""
        if not self._tops_up():
            return 0
        full = self.global_plan()[1]
        last = self._last_round(consumed)
        rows = int(full.offsets[-1] - full.offsets[min(last, len(full))])
        whole = len(full) - last == self.world_size and rows == self.world_size * self.config.batch_size
        return 0 if whole else rows
