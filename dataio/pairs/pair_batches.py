"""The source of image-text pairs: the image source's batch, and the caption's fields beside it.

The image half is ``ImageBatchSource``'s own (the crops drawn from the batch's seed key, turbo's region decode or
DALI, ``transform=``, remote readahead), and one more read task fills the text fields (``caption_batches``) on a
decode thread beside the image chunks. With ``CaptionConfig.bucket`` the caption lengths group the epoch's
order (``image_sampling``).
"""

from __future__ import annotations

import numpy as np

from dataio.augment import SeedKey
from dataio.formats.errors import ConfigError
from dataio.images.config import ImageLoaderConfig
from dataio.images.dali_decode import DaliDecoder
from dataio.images.image_batches import ImageBatchSource
from dataio.images.image_shards import ImageShards
from dataio.pairs.caption_batches import CaptionBatches
from dataio.pairs.caption_config import CaptionConfig
from dataio.pipeline.sample_source import BatchStart
from dataio.pipeline.stage_times import StageTimes


class PairBatchSource(ImageBatchSource):
    """Batches of ``image`` (as the image source draws and decodes them) and the text of ``options``."""

    def __init__(self, shards: ImageShards, config: ImageLoaderConfig, options: CaptionConfig | None,
                 times: StageTimes, *, dali: DaliDecoder | None = None, threads: int = 0) -> None:
        if config.mix is not None:
            raise ConfigError("{0} (MixUp/CutMix) mixes class labels; image-text pairs have captions instead", "mix")
        options = options or CaptionConfig()
        super().__init__(shards, config, options, times, dali=dali, threads=threads)
        self.captions = CaptionBatches(shards, options)

    @property
    def lengths(self) -> np.ndarray:
        """Each sample's caption length (tokens, else characters): what bucketing sorts by."""
        return self.captions.data.lengths

    @property
    def bucket_lengths(self) -> np.ndarray | None:  # type: ignore[override]
        return self.lengths if self.options.bucket else None

    def start_batch(self, index: int, keys: np.ndarray, key: SeedKey) -> BatchStart:
        begun = super().start_batch(index, keys, key)
        fields = begun.fields
        lap = self.times.lap()
        text = self.captions  # the task closes over the fields dict, never over the BatchStart (no cycle)
        return BatchStart(fields, [*begun.tasks, lambda: text.fill(fields, keys, lap)], laps=(*begun.laps, lap))
