"""``dataio.ImageLoader``: a drop-in replacement for ``DataLoader(ImageFolder(...))``.

Reads the shards written by ``dataio convert images``. Per batch, the main
thread draws every random parameter (crop boxes, flips) from a generator
seeded by (seed, epoch, rank, batch), then decode threads fill one
preallocated NHWC uint8 batch (see ``threaded_batches``), and
``DeviceTransfer`` moves it to the device. The output contract is in
``dataio.images.contract``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
import torch

from dataio.augment import (CropBoxes, DeviceAugment, EpochSizedCrop, MixConfig, Normalize, RandAugmentConfig,
                            ResolutionSchedule, SeedKey, crop_boxes)
from dataio.sampling import partition
from dataio.images.batches_view import BatchesWithIds
from dataio.images.buffer_pool import BufferPool
from dataio.images.device_transfer import DeviceTransfer
from dataio.sampling.mixture_options import mixture_sources, source_storage_options
from dataio.sampling.world import resolve_world
from dataio.sampling.epoch_position import EpochPosition, ResumableLoader
from dataio.formats.errors import ConfigError, SampleError
from dataio.loading.error_policy import DATA_EXCEPTIONS
from dataio.loading.exit_close import close_at_exit
from dataio.loading.dataloader_args import (Capabilities, check_sampler_size, constructor_defaults, dataloader_fields,
                                            given_options, keyword_checked)
from dataio.loading.loader_stats import LoaderStats, SourceCounts
from dataio.loading.stage_times import Lap, StageTimes
from dataio.loading.thread_tuner import ThreadGate, ThreadTuner
from dataio.images.config import IMAGENET_MEAN, IMAGENET_STD, ImageLoaderConfig
from dataio.loading.error_policy import ErrorPolicy
from dataio.loading.remote_options import DEFAULT_CACHE_LIMIT
from dataio.sampling.partition import DEFAULT_WINDOW
from dataio.images.sample_transform import SampleTransform
from dataio.sampling.epoch_sampler import EpochBatchSampler, EpochSampler
from dataio.images.dali_decode import DaliDecoder
from dataio.images.readahead import Readahead
from dataio.images.image_mixture import ImageMixture
from dataio.images.image_source import ImageSource, open_image_source
from dataio.images.mixed_shard_files import MixedShardFiles
from dataio.images.remote_shard_files import RemoteShardFiles
from dataio.images.shard_files import ShardFiles
from dataio.images.threaded_batches import BatchTimeout, ThreadedBatches
from dataio.images.turbo_decode import REGION_DECODE, decode_crop_into
from dataio.formats.remote.storage import Location, redact
from dataio.formats.dataset.sample_table import SampleTable, sample_checksum
from dataio.formats.fallback_log import info_once
from dataio.formats.pil_build import describe_pil

log = logging.getLogger("dataio")
CHUNK = 32  # samples per decode task
FIELDS = frozenset(f.name for f in dataclasses.fields(ImageLoaderConfig))
FACE = Capabilities(name="ImageLoader", threads=True)  # num_workers = decode threads
DEFAULTS = constructor_defaults(ImageLoaderConfig)  # the constructor's keywords and their defaults


class ImageBatch(NamedTuple):
    """A batch with its provenance, from ``ImageLoader.batches()``."""

    images: torch.Tensor  # see dataio.images.contract
    labels: torch.Tensor  # (N,) int64, or (N, classes) float soft labels with mix
    samples: np.ndarray  # (N,) int64 global sample ids (rows of the sample table)
    repeated: np.ndarray  # (N,) bool: padding repeats that evaluation should drop


@dataclasses.dataclass
class _HostBatch:
    images: torch.Tensor  # (N, S, S, 3) uint8
    labels: torch.Tensor  # (N,) int64
    key: SeedKey  # seeds this batch's device augmentation
    samples: np.ndarray  # (N,) int64
    repeated: np.ndarray  # (N,) bool
    planned: int  # positions of the epoch order this batch covers (before any skipped sample)
    crops: CropBoxes | None = None  # crop_on_device: boxes in decoded pixels, and flips
    laps: tuple[Lap, ...] = ()  # the decode tasks' stopwatches: when the batch finished decoding

    def finished(self) -> float:
        """When its last decode task finished (perf_counter seconds)."""
        return max((lap.finished for lap in self.laps), default=0.0)

    def keep(self, mask: np.ndarray) -> "_HostBatch":
        """The batch without the samples where ``mask`` is False."""
        index = torch.from_numpy(mask)
        crops = self.crops and CropBoxes(boxes=self.crops.boxes[mask], flipped=self.crops.flipped[mask])
        return _HostBatch(self.images[index], self.labels[index], self.key, self.samples[mask], self.repeated[mask],
                          self.planned, crops, self.laps)


class ImageLoader(ResumableLoader):
    """Iterate ``(images, labels)`` batches over an image shard folder.

    ``ImageLoader(folder, batch_size=256, image_size=224, train=True, ...)``
    takes the fields of :class:`ImageLoaderConfig` as keywords, or a
    ``config=``. Each ``for`` pass is one epoch; the epoch advances by itself
    after a full pass, or is set with ``set_epoch``. ``batches()`` yields
    ``ImageBatch`` with sample ids and padding flags; ``state_dict()`` resumes
    mid-epoch, on the same or another world size. Every keyword of
    ``torch.utils.data.DataLoader`` is honoured, mapped or refused
    (``dataio.loading.dataloader_args``).
    """

    @keyword_checked
    def __init__(self, source: str | Path | Mapping[str, str | Path], config: ImageLoaderConfig | None = None, *,
                 batch_size: int = 256,
                 image_size: int = 224,
                 train: bool = True,
                 shuffle: bool | None = None,
                 seed: int = 0,
                 drop_last: bool = False,
                 drop_tail: bool | None = None,
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
                 in_order: bool | None = None) -> None:
        """Open the shard folder (or URL) ``source`` (a dict ``{name: folder or URL}`` with ``weights`` is a
        mixture, ``dataio.images.image_mixture``); every keyword is a field of :class:`ImageLoaderConfig`
        (documented there, one line each) or one of ``torch.utils.data.DataLoader``'s.

        ``config=`` gives them all at once; a keyword then replaces that field (one passed with its default
        value leaves the config's). DataLoader's keywords are honoured, mapped or refused in one line
        (``dataio.loading.dataloader_args``): ``sampler`` (a ``DistributedSampler`` gives rank, world size,
        shuffle, seed and its ``drop_last``), ``prefetch_factor`` (``prefetch_batches``), ``generator`` (the
        seed), ``persistent_workers``/``in_order`` (accepted: threads persist, batches come in order),
        ``pin_memory_device``; ``batch_sampler``, ``collate_fn``, ``worker_init_fn``, ``multiprocessing_context``
        are refused, saying what to use instead.
        """
        options = given_options(locals(), DEFAULTS)
        base = config or ImageLoaderConfig()
        fields, self._follow = dataloader_fields(options, FIELDS, FACE, base)
        self.config = dataclasses.replace(base, **fields)
        c = self.config
        self.mixture: ImageMixture | None = None
        self.location: Location | None = None  # one source's; None for a mixture (see mixture.sources)
        self.files: ShardFiles | RemoteShardFiles | MixedShardFiles
        self.table: SampleTable  # a mixture's: the sources' end to end, labels in the combined classes
        sources = mixture_sources(source, c.weights)
        if sources is None:
            one = open_image_source(source, c, c.storage_options)
            self.location, self.manifest, self.table, self.files = one.location, one.manifest, one.table, one.files
            self._faults, self.folder = one.faults, one.folder
            fingerprint = self.manifest.fingerprint()
        else:
            self.mixture = self._open_mixture(sources)
            self.manifest, self.table, self.files = self.mixture.manifest, self.mixture.table, self.mixture.files
            self._faults, self.folder = self.mixture.faults, self.mixture.describe()
            fingerprint = self.mixture.fingerprint
        check_sampler_size(options.get("sampler"), len(self.table), str(self.folder))
        if c.mix is not None and c.mix.num_classes < len(self.manifest.classes):  # else: a one-hot past its end
            raise ConfigError(f"{{0}}.num_classes is {c.mix.num_classes}, fewer than the "
                              f"{len(self.manifest.classes)} classes of {self.folder}"
                              f"{' (combined)' if self.mixture else ''}", "mix")
        self._checksums = self.table.checksum if self.config.verify_samples else None
        threads = self.config.threads
        # auto: tuned for turbo's decode threads; DALI's own threads take the budget as it is
        tune = self.config.auto_threads and threads > 1 and self.config.resolved_decoder == "turbo"
        tuner = ThreadTuner(threads) if tune else None
        self.stats = LoaderStats(max_errors=self.config.max_errors, stages=StageTimes(profile=self.config.profile),
                                 fixed_threads=None if tuner else threads, tuner=tuner,
                                 sources=SourceCounts(self.mixture.names, units=("samples",)) if self.mixture else {})
        self._gate = ThreadGate(tuner.threads) if tuner else None  # auto: the tuner's count of the pool at work
        self.world_size, self.rank = resolve_world(self.config.world_size, self.config.rank)
        partition.check_world(self._epoch_size(0), self.world_size, drop_last=self.config.drop_last,
                              drop_tail=self.config.drops_tail, multiple=self.config.batch_size_at(0))
        self.position = EpochPosition(seed=self.config.seed, world_size=self.world_size, dataset=fingerprint)
        self._order: tuple[int, np.ndarray] | None = None
        self._dali = self._dali_decoder() if self.config.resolved_decoder == "dali" else None
        self._pool = self._thread_pool()
        self._normalize = Normalize(self.config.mean, self.config.std) if self.config.normalize else None
        self._transform = SampleTransform(self.config.transform) if self.config.transform is not None else None
        self._transfer = DeviceTransfer(self.config, self._device_augment(), self._normalize, self.stats.stages)
        self._pin = self.config.pin_memory and torch.cuda.is_available()
        self._buffers = BufferPool(capacity=self.config.prefetch_batches * max(1, threads) + 4)
        log.info("ImageLoader(%s): %d samples, %s transforms, decoder %s, %s decode threads, rank %d of %d, %s "
                 "output on %s%s", redact(str(self.folder)), len(self.table), "training" if c.train else "evaluation",
                 self.decoder, "auto" if tuner else threads, self.rank, self.world_size,
                 "float32 normalised" if c.normalize else "uint8", c.device,
                 f"; {self._epoch_size(0)} samples in epoch 0, {len(self.manifest.classes)} classes combined"
                 if self.mixture else "")
        info_once("image-loader", f"ImageLoader decodes with {self.decoder}; {describe_pil()}; region decoder "
                                  f"{'built' if REGION_DECODE else 'not built'}")
        self._readahead: Readahead | None = None  # remote: the current pass's fetches

    def _open_mixture(self, sources: dict[str, str | Path]) -> ImageMixture:
        """Each source opened, then laid end to end; the files of those opened are closed if one fails."""
        opened: dict[str, ImageSource] = {}
        try:
            for name, where in sources.items():
                options = source_storage_options(self.config.storage_options, sources, name)
                opened[name] = open_image_source(where, self.config, options)
            return ImageMixture(opened, self.config)
        except BaseException:
            for one in opened.values():
                one.files.close()
            raise

    def _dali_decoder(self) -> DaliDecoder:
        c = self.config
        device = torch.device(c.device)
        device_id = (device.index or 0) if device.type == "cuda" else None
        max_batch = max(c.schedule.batch_size_at(e) for e in range(c.schedule.epochs)) if c.schedule else c.batch_size
        return DaliDecoder(max_batch=max_batch, threads=c.threads or 1, device_id=device_id,
                           hw_decoder_load=c.hw_decoder_load, seed=c.seed)

    @property
    def decoder(self) -> str:
        """The decoder in use: 'turbo' or 'dali'."""
        return "dali" if self._dali is not None else "turbo"

    def _device_augment(self) -> DeviceAugment | None:
        c = self.config
        if not c.device_augments:
            return None
        crop = None
        if c.crop_on_device:  # sizes come from the schedule per epoch; the boxes from make_batch
            crop = EpochSizedCrop(c.image_size, schedule=c.schedule, scale=c.crop_scale, ratio=c.crop_ratio,
                                  hflip=c.hflip)
        return DeviceAugment(crop=crop, randaugment=c.randaugment, mix=c.mix, normalize=self._normalize,
                             channels_last=c.channels_last)

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
    def drop_last(self) -> bool:
        return self.config.drop_last

    @property
    def num_workers(self) -> int:
        return self.config.threads

    @property
    def pin_memory(self) -> bool:
        return self.config.pin_memory

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
    def prefetch_factor(self) -> int:
        return self.config.prefetch_batches

    @property
    def persistent_workers(self) -> bool:
        """Always True: the decode threads live as long as the loader."""
        return True

    @property
    def timeout(self) -> float:
        return self.config.timeout

    @property
    def dataset(self) -> torch.utils.data.Dataset:
        """The shards as an ``ImageFolder``-like data set (``dataio.ShardDataset``): len, classes, targets, and
        ``dataset[i]``, sample ``i`` as this loader yields it in eval mode (resized and centre-cropped to
        ``image_size``, its dtype and normalisation), so ``Subset(loader.dataset, ...)`` stacks with its batches."""
        from dataio.images.shard_dataset import ShardDataset  # lazy: shard_dataset reads through this module
        return ShardDataset._over(self)

    @property
    def sampler(self) -> EpochSampler:
        """``set_epoch``, ``len`` and this rank's sample ids of the pass (as a ``DistributedSampler``)."""
        return EpochSampler(self)

    @property
    def batch_sampler(self) -> EpochBatchSampler:
        """This rank's sample ids per batch of the pass (as DataLoader's ``BatchSampler``, over ``sampler``)."""
        return EpochBatchSampler(self, self._batch_ids)

    def sample_ids(self) -> np.ndarray:
        """This rank's sample ids of the next (or current) pass, padding repeats included, as its sampler's.

        With ``drop_last`` the samples of a short last batch are listed but not read (as DataLoader's sampler).
        """
        return self.order()[self._share()[0]]

    def _batch_ids(self) -> list[np.ndarray]:
        ids = self.sample_ids()
        return [ids[start:stop] for start, stop in self._bounds(len(ids))]

    def _bounds(self, count: int) -> list[tuple[int, int]]:
        """The pass's batches over this rank's ``count`` samples; ``drop_last`` drops a short last one."""
        return partition.batch_bounds(count, self.batch_size, self.config.drop_last)

    def __len__(self) -> int:
        """Batches of the epoch on this rank (as DataLoader's): this pass's, plus those yielded before a resume.

        Lightning counts a resumed epoch's steps from its checkpoint and ends
        the epoch at ``len``, as torchdata's ``StatefulDataLoader`` keeps it.
        """
        return self.position.before + len(self._bounds(len(self._share()[0])))

    def num_samples(self) -> int:
        """Samples this rank reads in the next (or current) pass, padding repeats included."""
        bounds = self._bounds(len(self._share()[0]))
        return bounds[-1][1] if bounds else 0

    # -- iteration --------------------------------------------------------------------------
    def order(self, epoch: int | None = None) -> np.ndarray:
        """The epoch's global sample order (``partition.epoch_order``), the same on every rank."""
        epoch = self.epoch if epoch is None else epoch
        if self._order is None or self._order[0] != epoch:
            c = self.config
            if self.mixture is not None:  # the blend of the sources' passes (ids into the combined table)
                self._order = (epoch, self.mixture.plan.order(epoch))
            else:
                self._order = (epoch, partition.epoch_order(self.table.shard, seed=c.seed, epoch=epoch,
                                                            shuffle=c.shuffles, window=c.shuffle_window))
        return self._order[1]

    def _epoch_size(self, epoch: int | None = None) -> int:
        """Samples in the epoch's order: the table's, or a mixture's epoch rule's."""
        if self.mixture is None:
            return len(self.table)
        return self.mixture.epoch_size(self.epoch if epoch is None else epoch)

    def mixture_passes(self) -> dict[str, int]:
        """A mixture's passes each source has finished, by the position of this pass (all ranks together)."""
        if self.mixture is None:
            return {}
        consumed = min(self.position.consumed_now(), self._epoch_size())
        return {name: entry["passes"] for name, entry in self.mixture.plan.counts(self.epoch, consumed).items()}

    def _share(self) -> tuple[np.ndarray, np.ndarray]:
        """This rank's positions of the order in the pass from ``position.consumed`` (its sampler's), and
        repeat flags; a mixture's a batch at a time (``partition.rank_share``'s ``block``), so that each batch
        is a contiguous span of the blend."""
        return partition.rank_share(self._epoch_size(), world_size=self.world_size, rank=self.rank,
                                    consumed=self.position.consumed, drop_last=False,
                                    drop_tail=self.config.drops_tail,
                                    block=self.batch_size if self.mixture is not None else 1)

    def _make_batch(self, samples: np.ndarray, repeated: np.ndarray, bounds: list[tuple[int, int]],
                    consumed: int, readahead: Readahead | None = None) -> Callable:
        c = self.config
        epoch = self.epoch
        size = c.decode_size_at(epoch)

        def make(index: int) -> tuple[_HostBatch, list[Callable[[], list]]]:
            start, stop = bounds[index]
            keys = samples[start:stop]
            # seeded by the global position of the batch: a resume on the same world redraws the same crops
            step = consumed + self.world_size * start
            rng = np.random.default_rng([c.seed, epoch, self.rank, step])
            widths, heights = self.table.width[keys], self.table.height[keys]
            device_crops = None
            if c.train:
                boxes = crop_boxes.random_resized_crop_boxes(widths, heights, rng, c.crop_scale, c.crop_ratio)
                flipped = crop_boxes.flips(len(keys), rng, c.hflip)
                if c.crop_on_device:  # decode whole images; crop the mapped boxes on the device
                    scale = np.stack([size / widths, size / heights] * 2, axis=1)
                    device_crops = CropBoxes(boxes=boxes * scale, flipped=flipped)
                    boxes = np.stack([np.zeros(len(keys)), np.zeros(len(keys)), widths, heights], 1).astype(float)
                    flipped = np.zeros(len(keys), dtype=bool)
            else:
                boxes = crop_boxes.center_crop_boxes(widths, heights, c.val_crop_ratio)
                flipped = np.zeros(len(keys), dtype=bool)
            # transform= with a generator parameter: one seed per sample, drawn after the crops (unchanged)
            seeds = rng.integers(0, 2**63 - 1, size=len(keys)) if self._transform and self._transform.seeded else None
            labels = torch.from_numpy(self.table.label[keys].astype(np.int64))  # faulty rows are dropped later
            key = SeedKey(seed=c.seed, epoch=epoch, rank=self.rank, step=step)
            flags = repeated[start:stop]
            fetched = readahead.take(index) if readahead is not None else None  # remote: the batch's bytes
            if self._dali is not None:
                lap = self.stats.stages.lap()
                batch = _HostBatch(torch.empty(0), labels, key, keys, flags, stop - start, device_crops, (lap,))
                return batch, [lambda: self._decode_dali_batch(batch, keys, boxes, flipped, size, lap, fetched)]
            shape = (len(keys), size, size, 3)
            if self._pin:  # torch's pinned host allocator caches and reuses these
                images = torch.empty(shape, dtype=torch.uint8, pin_memory=True)
                pixels = images.numpy()
            else:
                pixels = self._buffers.get(shape)
                images = torch.from_numpy(pixels)
            chunks = range(0, len(keys), CHUNK)
            laps = tuple(self.stats.stages.lap() for _ in chunks)  # one per task: each runs on one thread
            tasks = [(lambda lo=lo, lap=lap: self._decode_range(keys, boxes, flipped, pixels, lo,
                                                                 min(lo + CHUNK, len(keys)), lap, fetched, seeds))
                     for lo, lap in zip(chunks, laps)]
            return _HostBatch(images, labels, key, keys, flags, stop - start, device_crops, laps), tasks

        return make

    def _fetch(self, keys: np.ndarray) -> list[bytes | OSError | None]:
        """The remote bytes of ``keys`` in one batched read (None for rows the table faults name); cached
        bytes that fail their checksum are read again from the source."""
        wanted = [i for i, sample in enumerate(keys.tolist()) if sample not in self._faults]
        requests = [(int(self.table.shard[keys[i]]), int(self.table.offset[keys[i]]), int(self.table.size[keys[i]]))
                    for i in wanted]
        checksums = None if self._checksums is None else [int(self._checksums[keys[i]]) for i in wanted]
        out: list[bytes | OSError | None] = [None] * len(keys)
        for i, data in zip(wanted, self.files.read_many(requests, checksums)):
            out[i] = data
        return out

    def _read_sample(self, sample: int, fetched: bytes | OSError | None = None) -> bytes:
        """The encoded image of ``sample`` from its shard (or as ``fetched`` ahead), checked against the
        table's checksum.

        Raises ValueError or OSError (data errors, so the error policy applies)
        for a row that disagrees with the manifest, bytes that are not those
        packed, or a remote read that failed after its retries.
        """
        fault = self._faults.get(sample)
        if fault is not None:
            raise ValueError(f"sample table: {fault}")
        if fetched is None and self.files.remote:
            fetched = self._fetch(np.array([sample]))[0]
        if isinstance(fetched, OSError):
            raise fetched
        shard = int(self.table.shard[sample])
        data = fetched if fetched is not None else self.files.read(shard, int(self.table.offset[sample]),
                                                                    int(self.table.size[sample]))
        if self._checksums is not None and sample_checksum(data) != int(self._checksums[sample]):
            raise ValueError("checksum mismatch: the image bytes are not those packed (damaged shard)")
        return data

    def _sample_error(self, sample: int, reason: str) -> SampleError:
        """A data error naming ``sample`` by shard and key."""
        shard = int(self.table.shard[sample])
        where = self.files.names[shard] if 0 <= shard < len(self.files.names) else self.manifest.sample_table
        return SampleError(where, self.table.key(sample), reason)

    def _decode_range(self, keys, boxes, flipped, pixels, lo: int, hi: int, lap: Lap,
                      fetched: Future | None = None, seeds: np.ndarray | None = None) -> list[tuple[int, SampleError]]:
        """Decode samples lo..hi-1 of a batch; returns the data errors as (position, error).

        With ``num_workers="auto"`` the gate lets the tuner's count of the pool's threads work at once.
        """
        if self._gate is None:
            return self._decode_samples(keys, boxes, flipped, pixels, lo, hi, lap, fetched, seeds)
        with self._gate:
            return self._decode_samples(keys, boxes, flipped, pixels, lo, hi, lap, fetched, seeds)

    def _decode_samples(self, keys, boxes, flipped, pixels, lo: int, hi: int, lap: Lap,
                        fetched: Future | None, seeds: np.ndarray | None = None) -> list[tuple[int, SampleError]]:
        failures = []
        c = self.config
        with lap("read"):  # remote: the batch's ranges, fetched ahead (waited for here if not there yet)
            data = fetched.result() if fetched is not None else [None] * len(keys)
        for i in range(lo, hi):
            sample = int(keys[i])
            try:
                with lap("read"):
                    encoded_bytes = self._read_sample(sample, data[i])
                decode_crop_into(encoded_bytes, boxes[i], bool(flipped[i]), pixels[i], fast_resize=c.fast_resize,
                                 reduced_decode=c.reduced_decode, region_decode=c.region_decode, lap=lap)
            except DATA_EXCEPTIONS as e:
                failures.append((i, self._sample_error(sample, f"{type(e).__name__}: {e}")))
                continue
            if self._transform is not None:  # the user's code: its errors are not data errors
                with lap("transform"):
                    self._apply_transform(pixels[i], sample, None if seeds is None else int(seeds[i]))
        lap.items = hi - lo
        lap.flush()
        return failures

    def _apply_transform(self, slot: np.ndarray, sample: int, seed: int | None) -> None:
        """``transform=`` on one decoded slot; an exception it raises gets a note naming the sample."""
        def where() -> str:  # only built for a message
            return f"sample {self.table.key(sample)!r} in shard {self.files.names[int(self.table.shard[sample])]}"

        try:
            self._transform(slot, seed, where)
        except Exception as e:
            if not isinstance(e, ConfigError) and hasattr(e, "add_note"):  # add_note: Python 3.11+
                e.add_note(f"dataio: raised by transform= on {where()}")
            raise

    def _decode_dali_batch(self, batch: _HostBatch, keys, boxes, flipped, size: int,
                           lap: Lap, fetched: Future | None = None) -> list[tuple[int, SampleError]]:
        """Fill ``batch.images`` with DALI; the decoder names the files it fails on.

        DALI decodes, crops and resizes in one pipeline run: timed as ``decode``.
        """
        encoded, failures = [], []
        with lap("read"):  # remote: the batch's ranges, fetched ahead (waited for here if not there yet)
            data = fetched.result() if fetched is not None else [None] * len(keys)
        for i, sample in enumerate(keys.tolist()):
            try:
                with lap("read"):
                    encoded.append(np.frombuffer(self._read_sample(sample, data[i]), dtype=np.uint8))
            except DATA_EXCEPTIONS as e:
                failures.append((i, self._sample_error(sample, str(e))))
        unreadable = {i for i, _ in failures}
        readable = [i for i in range(len(keys)) if i not in unreadable]
        with lap("decode"):
            images, failed = self._dali.decode_each(encoded, boxes[readable], flipped[readable], size)
        lap.items = len(keys)
        lap.flush()
        failures += [(readable[i], self._sample_error(int(keys[readable[i]]), reason)) for i, reason in failed]
        if unreadable:  # put the decoded images at their positions, zeros at the unreadable ones
            batch.images = torch.zeros((len(keys), size, size, 3), dtype=torch.uint8, device=images.device)
            batch.images[readable] = images
        else:
            batch.images = images
        return failures

    def _thread_pool(self) -> ThreadPoolExecutor | None:
        """The decode threads (DALI: one thread, a pipeline run at a time, overlapped with the consumer), made
        in this process: ``_pool_pid`` tells a forked child, where the parent's threads do not exist."""
        self._pool_pid = os.getpid()
        if self._dali is not None:
            return ThreadPoolExecutor(1, thread_name_prefix="dataio-dali")
        threads = self.config.threads
        return ThreadPoolExecutor(threads, thread_name_prefix="dataio-decode") if threads else None

    def _host_batches(self, consumed: int) -> Iterator[_HostBatch]:
        if self._pool is not None and self._pool_pid != os.getpid():
            # A forked child iterating its copy of the loader (``fork`` multiprocessing, a notebook DDP strategy):
            # the executor's threads stayed in the parent and its tasks would wait for them forever, as would a
            # decode thread on a num_workers="auto" gate the parent's threads held at the fork.
            self._pool = self._thread_pool()
            if self._gate is not None:
                self._gate = ThreadGate(self._gate.limit)
        positions, repeated = self._share()
        samples = self.order()[positions]
        bounds = self._bounds(len(samples))
        readahead = None
        if self.files.remote:
            readahead = Readahead(lambda i: self._fetch(samples[bounds[i][0]:bounds[i][1]]), len(bounds),
                                  depth=self.config.readahead_batches, threads=self.config.readahead_threads)
            self._readahead = readahead
        producer = ThreadedBatches(self._make_batch(samples, repeated, bounds, consumed, readahead), len(bounds),
                                   pool=self._pool, prefetch=self.config.prefetch_batches * max(1, self.config.threads),
                                   timeout=self.config.timeout, times=self.stats.stages)
        tuner = self.stats.tuner
        if tuner is not None:
            tuner.restart()
        try:
            yield from self._checked(producer)
        except BatchTimeout as e:  # name the data set, and the read it waits on
            waiting = self.files.waiting() if self.files.remote else ""
            raise BatchTimeout(f"{self.folder}: {e}" + (f"; {waiting}" if waiting else "")) from None
        finally:
            if readahead is not None:  # reads in flight are let go, not waited for
                readahead.close()

    def _checked(self, producer: ThreadedBatches) -> Iterator[_HostBatch]:
        """The batches of ``producer`` with their failed samples handled by the error policy."""
        tuner = self.stats.tuner
        for batch, failures in producer:
            if tuner is not None and not tuner.done:  # auto: decode throughput at the gate's count
                self._gate.set_limit(tuner.observe(len(batch.labels), batch.finished(), time.perf_counter()))
            if failures:
                for _, error in sorted(failures, key=lambda f: f[0]):
                    self.stats.handle(self.config.on_error, error)
                keep = np.ones(len(batch.labels), dtype=bool)
                keep[[i for i, _ in failures]] = False
                batch = batch.keep(keep)
            self.stats.samples_ok += len(batch.labels)
            yield batch  # possibly empty under the skip policy; counted, then dropped

    def batches(self) -> Iterator[ImageBatch]:
        """One pass (an epoch, or its rest after a resume) of ``ImageBatch``.

        ``stats.stages`` records the pass's stages; ``wait`` is the consumer's
        time inside ``next()``, ``pass`` the wall time of the pass. A pass
        still suspended at interpreter exit is closed then (``loading.exit_close``);
        one started during another pass, or after ``close()``, is refused.
        """
        return close_at_exit(self._one_pass(self._batches()))

    def _batches(self) -> Iterator[ImageBatch]:
        self._follow_sampler_epoch()
        consumed = self.position.begin(self._epoch_size())
        times = self.stats.stages
        times.begin(self.epoch)
        start = time.perf_counter()
        wait: Any = times.range("wait").__enter__()
        try:
            for images, labels, host in self._transfer(self._host_batches(consumed)):
                self.position.advance(host.planned)  # before the yield: state_dict() then covers this batch
                if self.mixture is not None:  # one bincount a batch
                    self.stats.sources.add(np.bincount(self.mixture.source_of(host.samples),
                                                       minlength=len(self.mixture.names)))
                if len(labels):
                    wait, _ = None, wait.__exit__()
                    yield ImageBatch(images, labels, host.samples, host.repeated)
                    wait = times.range("wait").__enter__()
        finally:
            if wait is not None:  # a profiler range is never left open, even when the pass raises
                wait.__exit__()
        times.add("pass", time.perf_counter() - start)
        self.position.end()

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return close_at_exit(self._one_pass(self._images_and_labels()))

    def _images_and_labels(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for batch in self._batches():
            yield batch.images, batch.labels

    def with_ids(self) -> BatchesWithIds:
        """This loader, iterated as ``ImageBatch`` (images, labels, sample ids, padding flags) rather than
        ``(images, labels)``: to return from a Lightning ``val_dataloader`` and count each sample once
        (``batch.repeated`` flags the padding repeats of DDP ranks)."""
        return BatchesWithIds(self)

    def close(self) -> None:
        """Stop the decode threads and close the shard files, in bounded time.

        Remote reads in flight are abandoned, not waited for (a stalled store
        held this for minutes); the decode threads are then joined, as none
        of them waits on the network any more.
        """
        self._closed = True
        if self._readahead is not None:
            self._readahead.close()
            self._readahead = None
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._dali is not None:
            self._dali.close()
        self.files.close()

    def __enter__(self) -> "ImageLoader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
