"""Which samples each rank reads in a pass, for any source read by samples (images, or a new kind).

The order is ``partition.epoch_order`` over the samples' shards (``_order_of``:
a mixture's blend instead); the share is dealt a sample at a time as
``DistributedSampler`` deals it, or a batch at a time where each batch must be
a contiguous span of the order (a mixture's blend, Accelerate's gather); the
plan cuts the share into batches of the epoch's batch size.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataio.loader.accelerate_pass import accelerator_live, last_round_rows
from dataio.pipeline.pass_plan import PassPlan, sample_plan
from dataio.sampling import partition
from dataio.sampling.epoch_position import EpochPosition
from dataio.sampling.given_order import padding_flags, sampler_indices


class SampleSharing:
    """Mixed in before ``SourceLoader`` (whose ``pass_plan`` and ``_follow_world`` it uses), over the loader's
    ``config`` (a ``LoaderConfig``: ``shuffles``, ``drops_tail``, ``batch_size_at``) and position."""

    config: Any
    position: EpochPosition
    world_size: int
    rank: int
    epoch: int
    batch_size: int
    _follow: Any
    _unpadded: bool  # Lightning's predict: each sample once, no padding (``share_request``)
    _order: tuple[int, np.ndarray] | None = None
    _by_samples = True  # a failure is a sample, and the source drops it (the driver checks both)
    _reads_sampler = True  # a sampler= is read as its indices (``given_order``): ``_follow`` holds it
    _order_passed = False  # the cached order of a sampler= was read by a pass: the next pass reads the sampler again
    _plan_cache: Any

    # -- what a kind says --------------------------------------------------------------------
    def _sample_shards(self) -> np.ndarray | int:
        """The shard of each sample (for the two-level shuffle), or the sample count (one shard)."""
        raise NotImplementedError

    def _order_of(self, epoch: int) -> np.ndarray:
        """The epoch's global order (a mixture overrides it with its blend)."""
        c = self.config
        return partition.epoch_order(self._sample_shards(), seed=c.seed, epoch=epoch, shuffle=c.shuffles,
                                     window=c.shuffle_window)

    def _epoch_size(self, epoch: int | None = None) -> int:
        """Samples in the epoch's order."""
        shards = self._sample_shards()
        return shards if isinstance(shards, int) else len(shards)

    def _deals_whole_batches(self) -> bool:
        """Whether each batch must be a contiguous span of the order (a mixture's blend)."""
        return False

    # -- the sharing -------------------------------------------------------------------------
    def _follow_sampler_epoch(self) -> None:
        """At the start of a pass, after the sampler's epoch is followed (``ResumableLoader``): a sampler= order
        that an earlier pass read is read again, as torch's DataLoader iterates its sampler once a pass (Lightning's
        wrapper over a weighted sampler draws anew at the same epoch; a ``DistributedSampler`` yields the same)."""
        super()._follow_sampler_epoch()  # type: ignore[misc]
        if self._follow is not None and self._order_passed:
            self._order, self._plan_cache = None, None
        self._order_passed = self._follow is not None

    def order(self, epoch: int | None = None) -> np.ndarray:
        """The epoch's global sample order, the same on every rank (computed once per epoch); with a sampler=,
        the indices it yields on this rank for the epoch (``given_order``)."""
        epoch = self._next_pass_epoch() if epoch is None else epoch
        if self._order is None or self._order[0] != epoch:
            if self._follow is not None:
                shards = self._sample_shards()
                size = shards if isinstance(shards, int) else len(shards)
                self._order = (epoch, sampler_indices(self._follow, epoch, size, str(getattr(self, "folder", ""))))
                self._order_passed = self._live  # read for a len() before the pass: that pass reads it
            else:
                self._order = (epoch, self._order_of(epoch))
        return self._order[1]

    def _epoch_total(self) -> int:
        return len(self.order()) if self._follow is not None else self._epoch_size()

    def _check_world(self) -> None:
        partition.check_world(self._epoch_size(0), self.world_size, drop_last=self.config.drop_last,
                              drop_tail=self.config.drops_tail, multiple=self.config.batch_size_at(0))

    def _deals_batches(self) -> bool:
        """Whether ranks are dealt whole batches in turn: where each batch must be a span of the order, or under
        Accelerate (as its prepared loaders deal them: ``accelerate_pass``), unless a DistributedSampler was given."""
        return self._deals_whole_batches() or (self.world_size > 1 and self._follow is None and accelerator_live())

    def _share(self, rank: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """This rank's (or ``rank``'s) positions of the order in the pass from ``position.consumed`` (its
        sampler's), and repeat flags (``partition.rank_share``; ``block``: a batch at a time)."""
        self._follow_world()
        if self._follow is not None:  # the sampler's own indices: this rank's, all of them, from the position
            total = len(self.order())
            positions = np.arange(min(self.position.consumed, total), total)
            return positions, padding_flags(self._follow, total)[positions]
        rank = self.rank if rank is None else rank
        return partition.rank_share(self._epoch_size(), world_size=self.world_size, rank=rank,
                                    consumed=self.position.consumed, drop_last=False,
                                    drop_tail=self.config.drops_tail,
                                    pad=self.config.even_batches and not self._unpadded,
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

    def epoch_samples(self) -> int:
        """Samples all ranks read together in the next (or current) pass: each rank's ``num_samples()``, summed
        here without a message (the shares are a function of the world); open_clip's ``dataloader.num_samples``,
        the whole set where this loader reads it all (``len(dataset)`` of torch's loader without a sampler)."""
        total = 0
        for rank in range(self.world_size):
            bounds = partition.batch_bounds(len(self._share(rank)[0]), self.batch_size, self.config.drop_last)
            total += bounds[-1][1] if bounds else 0
        return total

    def _accelerate_remainder(self, consumed: int) -> int:
        c = self.config
        padded = c.even_batches and not c.drops_tail and not c.drop_last and self._deals_batches()
        return last_round_rows(self._epoch_size() - consumed, world_size=self.world_size,
                               batch_size=self.batch_size, padded=padded)

    def _share_settings(self) -> dict[str, Any]:
        c = self.config
        return {"shuffle": c.shuffles, "shuffle_window": c.shuffle_window, "batch_size": self.batch_size,
                "drop_tail": c.drops_tail}
