"""Which source and device stage read a data set: the kind of sample its manifest declares.

One decision for the image loader, so that each kind stays in its own module: a folder declaring boxes (or a
loader given ``targets=``) is read by ``DetectionBatchSource`` into dict batches (``detection_batches``); an
image-text pair folder by ``PairBatchSource`` into dict batches (``pair_batches``); any other folder by the image
source into ``(images, labels)``. A keyword meant for another kind is refused in one line naming the folder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dataio.formats.dataset.pair_fields import holds_pairs
from dataio.formats.errors import ConfigError
from dataio.images.config import ImageLoaderConfig
from dataio.images.dali_decode import DaliDecoder
from dataio.images.detection_batches import detection_source_and_transfer
from dataio.images.device_transfer import device_stage
from dataio.images.image_batches import ImageBatchSource
from dataio.images.image_shards import ImageShards
from dataio.images.pair_batches import PairBatchSource, batch_source
from dataio.images.pair_transfer import PairTransfer
from dataio.images.target_columns import has_boxes
from dataio.pipeline.host_batch import HostBatch
from dataio.pipeline.stage_times import StageTimes


def source_and_transfer(shards: ImageShards, config: ImageLoaderConfig, times: StageTimes, *,
                        dali: DaliDecoder | None, threads: int) -> tuple[ImageBatchSource, Callable[[HostBatch], Any]]:
    """The loader's source for ``shards`` and the device stage that finishes its batches."""
    pairs = holds_pairs(shards.manifest.sample_fields())
    if config.targets is not None or has_boxes(shards):
        if pairs:
            raise ConfigError(f"{{0}} is for folders with box targets; {shards.folder} holds image-text pairs",
                              "targets")
        if config.captions is not None:
            raise ConfigError(f"{{0}} is for image-text pair folders; {shards.folder} holds images with box "
                              "targets", "captions")
        return detection_source_and_transfer(shards, config, times, dali=dali, threads=threads)
    source = batch_source(shards, config, times, dali=dali, threads=threads)
    hosted = source.host_normalize is not None  # the decode threads normalise: the device stage must not again
    transfer = (PairTransfer(config, times, normalized_on_host=hosted) if isinstance(source, PairBatchSource)
                else device_stage(config, times, normalized_on_host=hosted))
    return source, transfer
