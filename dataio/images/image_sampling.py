"""Which images each rank reads in a pass: the epoch's order, this rank's share, its batches (``ImageLoader``'s).

The order is ``partition.epoch_order`` over the sample table's shards (a
mixture's: the blend of its sources' passes); the share is dealt a sample at
a time as ``DistributedSampler`` deals it, or a batch at a time where each
batch must be a contiguous span of the order (a mixture's blend, Accelerate's
gather); the plan cuts the share into batches of the epoch's batch size.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataio.images.image_shards import ImageShards
from dataio.loader.accelerate_pass import accelerator_live, last_round_rows
from dataio.pipeline.pass_plan import PassPlan, sample_plan
from dataio.sampling import partition
from dataio.sampling.epoch_position import EpochPosition


class ImageSampling:
    """The sampling half of ``ImageLoader``: mixed in before ``SourceLoader``, whose ``pass_plan`` and
    ``_follow_world`` it uses, over the loader's ``config``, ``shards`` and position."""

    config: Any
    shards: ImageShards
    position: EpochPosition
    world_size: int
    rank: int
    epoch: int
    batch_size: int
    _follow: Any
    _order: tuple[int, np.ndarray] | None = None

    def order(self, epoch: int | None = None) -> np.ndarray:
        """The epoch's global sample order (``partition.epoch_order``), the same on every rank."""
        epoch = self.epoch if epoch is None else epoch
        if self._order is None or self._order[0] != epoch:
            c, mixture = self.config, self.shards.mixture
            if mixture is not None:  # the blend of the sources' passes (ids into the combined table)
                self._order = (epoch, mixture.plan.order(epoch))
            else:
                self._order = (epoch, partition.epoch_order(self.shards.table.shard, seed=c.seed, epoch=epoch,
                                                            shuffle=c.shuffles, window=c.shuffle_window))
        return self._order[1]

    def _epoch_size(self, epoch: int | None = None) -> int:
        """Samples in the epoch's order: the table's, or a mixture's epoch rule's."""
        mixture = self.shards.mixture
        if mixture is None:
            return len(self.shards.table)
        return mixture.epoch_size(self.epoch if epoch is None else epoch)

    def _epoch_total(self) -> int:
        return self._epoch_size()

    def _check_world(self) -> None:
        partition.check_world(self._epoch_size(0), self.world_size, drop_last=self.config.drop_last,
                              drop_tail=self.config.drops_tail, multiple=self.config.batch_size_at(0))

    def _deals_batches(self) -> bool:
        """Whether ranks are dealt whole batches in turn: a mixture's (each batch a span of the blend), or under
        Accelerate (as its prepared loaders deal them: ``accelerate_pass``), unless a DistributedSampler was given."""
        return (self.shards.mixture is not None
                or (self.world_size > 1 and self._follow is None and accelerator_live()))

    def _share(self) -> tuple[np.ndarray, np.ndarray]:
        """This rank's positions of the order in the pass from ``position.consumed`` (its sampler's), and
        repeat flags (``partition.rank_share``; ``block``: a batch at a time)."""
        self._follow_world()
        return partition.rank_share(self._epoch_size(), world_size=self.world_size, rank=self.rank,
                                    consumed=self.position.consumed, drop_last=False,
                                    drop_tail=self.config.drops_tail, pad=self.config.even_batches,
                                    block=self.batch_size if self._deals_batches() else 1)

    def _make_plan(self) -> PassPlan:
        positions, repeated = self._share()
        bounds = partition.batch_bounds(len(positions), self.batch_size, self.config.drop_last)
        return sample_plan(self.order()[positions], repeated, bounds, consumed=self.position.consumed,
                           world_size=self.world_size)

    def sample_ids(self) -> np.ndarray:
        """This rank's sample ids of the next (or current) pass, padding repeats included, as its sampler's.

        With ``drop_last`` the samples of a short last batch are listed but not read (as DataLoader's sampler).
        """
        return self.order()[self._share()[0]]

    def num_samples(self) -> int:
        """Samples this rank reads in the next (or current) pass, padding repeats included."""
        return len(self.pass_plan().ids)

    def _accelerate_remainder(self, consumed: int) -> int:
        c = self.config
        padded = c.even_batches and not c.drops_tail and not c.drop_last and self._deals_batches()
        return last_round_rows(self._epoch_size() - consumed, world_size=self.world_size,
                               batch_size=self.batch_size, padded=padded)

    def mixture_passes(self) -> dict[str, int]:
        """A mixture's passes each source has finished, by the position of this pass (all ranks together)."""
        mixture = self.shards.mixture
        if mixture is None:
            return {}
        consumed = min(self.position.consumed_now(), self._epoch_size())
        return {name: entry["passes"] for name, entry in mixture.plan.counts(self.epoch, consumed).items()}
