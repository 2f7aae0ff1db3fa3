"""The image loader's source for image-text pairs: the image source's batch, with the caption's fields for a label.

``ImageLoader`` over a pair folder (``formats.dataset.pair_fields``) reads through this source: the
image half is ``ImageBatchSource``'s own (the crops drawn from the batch's seed key, turbo's region decode
or DALI, ``transform=``, remote readahead), and one more read task fills the text fields
(``caption_batches``) on a decode thread beside the image chunks. A classification folder keeps the image
source and its ``(images, labels)``. ``batch_source`` says which.
"""

from __future__ import annotations

import numpy as np

from dataio.augment import SeedKey
from dataio.formats.errors import ConfigError
from dataio.formats.dataset.pair_fields import holds_pairs
from dataio.images.caption_batches import CaptionBatches
from dataio.images.caption_config import CaptionConfig
from dataio.images.config import ImageLoaderConfig
from dataio.images.dali_decode import DaliDecoder
from dataio.images.image_batches import ImageBatchSource
from dataio.images.image_shards import ImageShards
from dataio.pipeline.sample_source import BatchStart
from dataio.pipeline.stage_times import StageTimes


class PairBatchSource(ImageBatchSource):
    """Batches of ``image`` (as the image source draws and decodes them) and the text of ``captions``."""

    def __init__(self, shards: ImageShards, config: ImageLoaderConfig, times: StageTimes, *,
                 dali: DaliDecoder | None = None, threads: int = 0) -> None:
        super().__init__(shards, config, times, dali=dali, threads=threads)
        self.captions = CaptionBatches(shards, config.captions or CaptionConfig())

    @property
    def lengths(self) -> np.ndarray:
        """Each sample's caption length (tokens, else characters): what bucketing sorts by."""
        return self.captions.data.lengths

    def start_batch(self, index: int, keys: np.ndarray, key: SeedKey) -> BatchStart:
        begun = super().start_batch(index, keys, key)
        fields = begun.fields
        del fields["label"]  # -1 in every row of a pair folder
        lap = self.times.lap()
        text = self.captions  # the task closes over the fields dict, never over the BatchStart (no cycle)
        return BatchStart(fields, [*begun.tasks, lambda: text.fill(fields, keys, lap)], laps=(*begun.laps, lap))


def batch_source(shards: ImageShards, config: ImageLoaderConfig, times: StageTimes, *, dali: DaliDecoder | None,
                 threads: int) -> ImageBatchSource:
    """The source for ``shards``: pairs' when its samples are image-text pairs, else the image source (whose
    ``mix`` one-hot targets must hold every class)."""
    if config.mix is not None and config.mix.num_classes < len(shards.manifest.classes):
        raise ConfigError(f"{{0}}.num_classes is {config.mix.num_classes}, fewer than the "
                          f"{len(shards.manifest.classes)} classes of {shards.folder}"
                          f"{' (combined)' if shards.mixture else ''}", "mix")
    if not holds_pairs(shards.manifest.sample_fields()):  # a mixture's: when every source holds pairs
        if config.captions is not None:
            raise ConfigError(f"{{0}} is for image-text pair folders; {shards.folder} holds images with classes "
                              "(its batches are (images, labels))", "captions")
        return ImageBatchSource(shards, config, times, dali=dali, threads=threads)
    if config.mix is not None:
        raise ConfigError("{0} (MixUp/CutMix) mixes class labels; image-text pairs have captions instead", "mix")
    return PairBatchSource(shards, config, times, dali=dali, threads=threads)
