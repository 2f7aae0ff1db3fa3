"""``dataio.ImageLoader``: a drop-in replacement for ``DataLoader(ImageFolder(...))``.

Reads the shards written by ``dataio convert images``: a façade over the loader
skeleton (``dataio.loader.source_loader``). Its source (``image_batches``)
draws each batch's crop boxes and flips from a generator seeded by (seed,
epoch, rank, batch) and decode threads fill one preallocated NHWC uint8 batch;
its sampling (``image_sampling``) says which images each rank reads; its device
stage (``device_transfer``) moves the batch and augments it there. The output
contract is in ``dataio.images.contract``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from dataio.augment import MixConfig, RandAugmentConfig, ResolutionSchedule, SeedKey
from dataio.formats.fallback_log import info_once
from dataio.formats.pil_build import describe_pil
from dataio.formats.remote.storage import redact
from dataio.images.config import IMAGENET_MEAN, IMAGENET_STD, ImageLoaderConfig, one_batch_size
from dataio.images.contract import ImageBatch
from dataio.images.caption_config import CaptionConfig
from dataio.images.detection_config import DetectionConfig
from dataio.images.image_batches import dali_decoder
from dataio.images.image_sampling import ImageSampling
from dataio.images.image_shards import ImageShards
from dataio.images.sample_facts import SampleFacts
from dataio.images.sample_kinds import source_and_transfer
from dataio.images.turbo_decode import REGION_DECODE
from dataio.loader.batches_view import BatchesWithIds
from dataio.loader.dataloader_args import (Capabilities, check_sampler_size, constructor_defaults, dataloader_fields,
                                           given_options, keyword_checked)
from dataio.loader.source_loader import SourceLoader
from dataio.pipeline.error_policy import ErrorPolicy
from dataio.pipeline.host_batch import HostBatch
from dataio.pipeline.loader_stats import LoaderStats, SourceCounts
from dataio.pipeline.stage_times import StageTimes
from dataio.pipeline.thread_tuner import ThreadTuner
from dataio.remote.remote_options import DEFAULT_CACHE_LIMIT
from dataio.sampling.partition import DEFAULT_WINDOW

log = logging.getLogger("dataio")
FIELDS = frozenset(f.name for f in dataclasses.fields(ImageLoaderConfig))
FACE = Capabilities(name="ImageLoader", threads=True)  # num_workers = decode threads
DEFAULTS = constructor_defaults(ImageLoaderConfig)  # the constructor's keywords and their defaults


class ImageLoader(SampleFacts, ImageSampling, SourceLoader):
    """Iterate ``(images, labels)`` batches over an image shard folder.

    ``ImageLoader(folder, batch_size=256, image_size=224, train=True, ...)``
    takes the fields of :class:`ImageLoaderConfig` as keywords, or a
    ``config=``. Each ``for`` pass is one epoch; the epoch advances by itself
    after a full pass, or is set with ``set_epoch``. ``batches()`` yields
    ``ImageBatch`` with sample ids and padding flags; ``state_dict()`` resumes
    mid-epoch, on the same or another world size. Every keyword of
    ``torch.utils.data.DataLoader`` is honoured, mapped or refused
    (``dataio.loader.dataloader_args``). A folder of image-text pairs or of boxes yields dicts instead
    (``captions=CaptionConfig``, ``targets=DetectionConfig``), sized by ``vocab_size`` / ``category_ids``.
    """

    config: ImageLoaderConfig
    _key_type = SeedKey  # each batch's crops, flips and device augmentation are drawn from it

    @keyword_checked
    def __init__(self, source: str | Path | Mapping[str, str | Path], config: ImageLoaderConfig | None = None, *,
                 batch_size: int = 256,
                 image_size: int = 224,
                 train: bool = True,
                 shuffle: bool | None = None,
                 seed: int = 0,
                 drop_last: bool = False,
                 drop_tail: bool | None = None,
                 even_batches: bool = True,
                 num_workers: int | Literal["auto"] | None = None,
                 cpu_budget: int | float | None = None,
                 pin_memory: bool = False,
                 device: str = "cpu",
                 normalize: bool = False,
                 mean: tuple[float, float, float] = IMAGENET_MEAN,
                 std: tuple[float, float, float] = IMAGENET_STD,
                 channels_last: bool = True,
                 crop_scale: tuple[float, float] = (0.08, 1.0),
                 crop_ratio: tuple[float, float] = (3 / 4, 4 / 3),
                 val_crop_ratio: float = 0.875,
                 hflip: float = 0.5,
                 transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 batch_transform: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None,
                 fast_resize: bool = False,
                 reduced_decode: bool = True,
                 region_decode: bool = True,
                 prefetch_batches: int = 1,
                 timeout: float = 0,
                 on_error: ErrorPolicy | str = ErrorPolicy.RAISE,
                 max_errors: int | None = None,
                 verify_checksums: bool = False,
                 verify_samples: bool = True,
                 world_size: int | None = None,
                 rank: int | None = None,
                 shuffle_window: int = DEFAULT_WINDOW,
                 randaugment: RandAugmentConfig | None = None,
                 mix: MixConfig | None = None,
                 crop_on_device: bool = False,
                 decode_size: int | None = None,
                 schedule: ResolutionSchedule | None = None,
                 decoder: Literal["auto", "turbo", "dali"] = "auto",
                 hw_decoder_load: float = 0.65,
                 storage_options: Mapping[str, Any] | None = None,
                 cache_dir: str | Path | None = None,
                 cache_limit: int = DEFAULT_CACHE_LIMIT,
                 retries: int = 4,
                 retry_backoff: float = 0.2,
                 remote_timeout: float = 20.0,
                 readahead_batches: int = 4,
                 readahead_threads: int = 4,
                 captions: CaptionConfig | None = None,
                 profile: bool = False,
                 weights: Any = None,
                 epoch_length: int | None = None,
                 epoch_until: str | None = None,
                 sampler: Any = None,
                 batch_sampler: Any = None,
                 collate_fn: Any = None,
                 worker_init_fn: Any = None,
                 multiprocessing_context: Any = None,
                 generator: torch.Generator | None = None,
                 prefetch_factor: int | None = None,
                 persistent_workers: bool | None = None,
                 pin_memory_device: str = "",
                 in_order: bool | None = None,
                 targets: DetectionConfig | None = None) -> None:
        """Open the shard folder (or URL) ``source`` (a dict ``{name: folder or URL}`` with ``weights`` is a
        mixture, ``dataio.images.image_mixture``); every keyword is a field of :class:`ImageLoaderConfig`
        (documented there, one line each) or one of ``torch.utils.data.DataLoader``'s.

        ``config=`` gives them all at once; a keyword then replaces that field (one passed with its default value
        leaves the config's). DataLoader's keywords are honoured, mapped or refused in one line (``dataio.loader.
        dataloader_args``): ``sampler`` (a ``DistributedSampler`` gives rank, world size, shuffle, seed and its
        ``drop_last``), ``prefetch_factor`` (``prefetch_batches``), ``generator`` (the seed), ``persistent_workers``
        /``in_order`` (accepted), ``pin_memory_device``; the others are refused, saying what to use instead.
        """
        options = one_batch_size(given_options(locals(), DEFAULTS), config)
        base = config or ImageLoaderConfig()
        fields, self._follow = dataloader_fields(options, FIELDS, FACE, base)
        self.config = c = dataclasses.replace(base, **fields)
        self.shards = shards = ImageShards.open(source, c)
        self.manifest, self.table, self.files, self.folder = shards.manifest, shards.table, shards.files, shards.folder
        self.mixture, self.location = shards.mixture, shards.location  # location: one source's, None for a mixture
        check_sampler_size(options.get("sampler"), len(self.table), str(self.folder))
        threads = c.threads
        dali = dali_decoder(c) if c.resolved_decoder == "dali" else None
        # auto: tuned for turbo's decode threads; DALI's own threads take the budget as it is
        tuner = ThreadTuner(threads) if c.auto_threads and threads > 1 and dali is None else None
        stats = LoaderStats(max_errors=c.max_errors, stages=StageTimes(profile=c.profile),
                            fixed_threads=None if tuner else threads, tuner=tuner,
                            sources=SourceCounts(self.mixture.names, units=("samples",)) if self.mixture else {})
        batches, self._transfer = source_and_transfer(shards, c, stats.stages, dali=dali, threads=threads)
        # DALI: one thread, a pipeline run at a time, overlapped with the consumer; boxes' and pairs' batches: dicts
        self._start(batches, stats, fingerprint=shards.fingerprint(), threads=1 if dali else threads,
                    prefetch=c.prefetch_batches, timeout=c.timeout, num_workers=threads)
        log.info("ImageLoader(%s): %d samples, %s transforms, decoder %s, %s decode threads, rank %d of %d, %s "
                 "output on %s%s", redact(str(self.folder)), len(self.table), "training" if c.train else "evaluation",
                 self.decoder, "auto" if tuner else threads, self.rank, self.world_size,
                 "float32 normalised" if c.normalize else "uint8", c.device,
                 f"; {self._epoch_size(0)} samples in epoch 0, {len(self.manifest.classes)} classes combined"
                 if self.mixture else "")
        info_once("image-loader", f"ImageLoader decodes with {self.decoder}; {describe_pil()}; region decoder "
                                  f"{'built' if REGION_DECODE else 'not built'}")

    @property
    def decoder(self) -> str:
        """The decoder in use: 'turbo' or 'dali'."""
        return "dali" if self.source.dali is not None else "turbo"

    # -- DataLoader-compatible surface -------------------------------------------------
    @property
    def batch_size(self) -> int:
        """Batch size of the current epoch (it varies with a dynamic-batch schedule)."""
        return self.config.batch_size_at(self.epoch)

    @property
    def image_size(self) -> int:
        """Output resolution of the current epoch."""
        return self.config.image_size_at(self.epoch)

    @property
    def classes(self) -> tuple[str, ...]:
        """The class names; a mixture's combined list (``dataio.images.class_map``)."""
        return self.manifest.classes

    @property
    def class_map(self) -> dict[str, tuple[int, ...]] | None:
        """A mixture's ``{source: combined index of each of its labels}``; None for one source, or for sources
        without class names (their labels are kept)."""
        return self.mixture.class_map.per_source if self.mixture else None

    @property
    def dataset(self) -> torch.utils.data.Dataset:
        """The shards as an ``ImageFolder``-like data set (``dataio.ShardDataset``): len, classes, targets, and
        ``dataset[i]``, sample ``i`` as this loader yields it in eval mode (resized and centre-cropped to
        ``image_size``, its dtype and normalisation), so ``Subset(loader.dataset, ...)`` stacks with its batches."""
        from dataio.images.shard_dataset import ShardDataset  # lazy: torch.utils.data datasets are seldom asked for
        return ShardDataset.over_shards(self.shards, self.config, self.image_size)

    # -- the skeleton's hooks ----------------------------------------------------------------
    def _move(self, host: HostBatch) -> tuple[torch.Tensor, torch.Tensor]:
        return self._transfer(host)

    def _counted(self, host: HostBatch) -> None:
        if self.mixture is not None:  # one bincount a batch
            self.stats.sources.add(np.bincount(self.mixture.source_of(host.samples), minlength=len(self.mixture.names)))

    def _kind(self) -> str:
        return f"ImageLoader/{'train' if self.config.train else 'eval'}"

    def _waiting(self) -> str:
        return self.files.waiting() if self.files.remote else ""

    # -- iteration --------------------------------------------------------------------------
    def batches(self) -> Iterator[ImageBatch]:
        """One pass (an epoch, or its rest after a resume) of ``ImageBatch``.

        ``stats.stages`` records the pass's stages; ``wait`` is the consumer's
        time inside ``next()``, ``pass`` the wall time of the pass. A pass
        still suspended at interpreter exit is closed then (``pipeline.exit_close``);
        one started during another pass, or after ``close()``, is refused.
        """
        return self._iterate(lambda moved, host: moved if isinstance(moved, dict) else
                             ImageBatch(moved[0], moved[1], host.samples, host.repeated))

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return self._iterate(lambda moved, host: moved)

    def with_ids(self) -> BatchesWithIds:
        """This loader, iterated as ``ImageBatch`` (images, labels, sample ids, padding flags) rather than
        ``(images, labels)``: to return from a Lightning ``val_dataloader`` and count each sample once
        (``batch.repeated`` flags the padding repeats of DDP ranks)."""
        return BatchesWithIds(self)
