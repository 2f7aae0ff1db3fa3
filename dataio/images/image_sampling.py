"""Which images each rank reads in a pass (``ImageLoader``'s): ``SampleSharing`` over the sample table, whose order
is a mixture's blend when the loader reads several sources."""

from __future__ import annotations

import numpy as np

from dataio.images.image_shards import ImageShards
from dataio.loader.sample_sharing import SampleSharing


class ImageSampling(SampleSharing):
    """The sampling half of ``ImageLoader``, over its ``shards`` (one source's table, or a mixture's)."""

    shards: ImageShards

    def _sample_shards(self) -> np.ndarray:
        return self.shards.table.shard

    def _order_of(self, epoch: int) -> np.ndarray:
        mixture = self.shards.mixture
        if mixture is not None:  # the blend of the sources' passes (ids into the combined table)
            return mixture.plan.order(epoch)
        return super()._order_of(epoch)

    def _epoch_size(self, epoch: int | None = None) -> int:
        """Samples in the epoch's order: the table's, or a mixture's epoch rule's."""
        mixture = self.shards.mixture
        if mixture is None:
            return len(self.shards.table)
        return mixture.epoch_size(self.epoch if epoch is None else epoch)

    def _deals_whole_batches(self) -> bool:
        return self.shards.mixture is not None  # each batch a span of the blend (its period aliases with ranks)

    def mixture_passes(self) -> dict[str, int]:
        """A mixture's passes each source has finished, by the position of this pass (all ranks together)."""
        mixture = self.shards.mixture
        if mixture is None:
            return {}
        consumed = min(self.position.consumed_now(), self._epoch_size())
        return {name: entry["passes"] for name, entry in mixture.plan.counts(self.epoch, consumed).items()}
