"""Which images each rank reads in a pass (``ImageLoader``'s): ``SampleSharing`` over the sample table, whose order
is a mixture's blend when the loader reads several sources."""

from __future__ import annotations

from typing import Any

import numpy as np

from dataio.images.image_shards import ImageShards
from dataio.loader.sample_sharing import SampleSharing
from dataio.sampling.length_buckets import bucketed

BUCKET_WINDOW = 64  # batches sorted by length together, when a kind's batches group by length (captions)


class ImageSampling(SampleSharing):
    """The sampling half of ``ImageLoader``, over its ``shards`` (one source's table, or a mixture's)."""

    shards: ImageShards
    source: Any  # the loader's source: ``bucket_lengths`` when its kind's batches group by length (captions)

    def _sample_shards(self) -> np.ndarray:
        return self.shards.table.order_shards  # a merged split conversion: the one-process shards (same order)

    def _order_of(self, epoch: int) -> np.ndarray:
        mixture = self.shards.mixture
        if mixture is not None:  # the blend of the sources' passes (ids into the combined table)
            order = mixture.plan.order(epoch)
        else:
            order = super()._order_of(epoch)
        lengths = self.source.bucket_lengths
        if lengths is not None:  # batches of about one length (image-text pairs' captions)
            order = bucketed(order, lengths, self.config.batch_size_at(epoch), BUCKET_WINDOW, seed=self.config.seed,
                             epoch=epoch)
        return order

    def _bucketed(self) -> bool:
        return self.source.bucket_lengths is not None

    def _epoch_size(self, epoch: int | None = None) -> int:
        """Samples in the epoch's order: the table's, or a mixture's epoch rule's."""
        mixture = self.shards.mixture
        if mixture is None:
            return len(self.shards.table)
        return mixture.epoch_size(self.epoch if epoch is None else epoch)

    def _deals_whole_batches(self) -> bool:
        # each batch a span of the blend (its period aliases with ranks), or of one length bucket
        return self.shards.mixture is not None or self._bucketed()

    def _share_settings(self) -> dict[str, Any]:
        return {**super()._share_settings(), "bucket": self._bucketed()}

    def mixture_passes(self) -> dict[str, int]:
        """A mixture's passes each source has finished, by the position of this pass (all ranks together)."""
        mixture = self.shards.mixture
        if mixture is None:
            return {}
        consumed = min(self.position.consumed_now(), self._epoch_size())
        return {name: entry["passes"] for name, entry in mixture.plan.counts(self.epoch, consumed).items()}
