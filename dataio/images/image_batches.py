"""The image loader's sample source: a batch of sample ids read and decoded into one preallocated NHWC batch.

``start_batch`` runs on the calling thread: it draws the batch's crop boxes and
flips from a generator seeded by the batch's key (seed, epoch, rank, global
position: the same on any thread count and after a resume), takes a buffer,
and returns a read task per ``CHUNK`` samples (libjpeg-turbo region decode
into the batch's slots, ``transform=`` on each) or one DALI task. Fields:
``image`` (N, S, S, 3) uint8, ``label`` (N,) int64, and with ``crop_on_device``
``crop_boxes``/``crop_flips`` for the device crop. Remote bytes are fetched a
few batches ahead (``Readahead``) and waited for in the tasks. With
``normalize=True`` on the CPU device, each image is decoded into the thread's
uint8 scratch and normalised from there into its slot of a float32 batch
(``augment.host_normalize``: one pass while the image is in cache, into pooled
memory); ``image`` is then that batch, NHWC-shaped as the uint8 one.
"""

from __future__ import annotations

import sys
import threading
from concurrent.futures import Future
from typing import Any

import numpy as np
import torch

from dataio.augment import SeedKey, crop_boxes
from dataio.augment.host_normalize import HostNormalize
from dataio.formats.errors import ConfigError
from dataio.formats.kinds import kind_of
from dataio.images.buffer_pool import BufferPool
from dataio.images.config import ImageLoaderConfig
from dataio.images.dali_decode import DaliDecoder
from dataio.images.image_shards import ImageShards
from dataio.images.sample_transform import SampleTransform, naming_the_sample
from dataio.images.table_size import check_size, header_size
from dataio.images.turbo_decode import decode_crop_into
from dataio.pipeline.error_policy import DATA_EXCEPTIONS
from dataio.pipeline.host_batch import HostBatch
from dataio.pipeline.pass_plan import PassPlan
from dataio.pipeline.sample_source import BatchStart, Failures, drop_samples
from dataio.pipeline.stage_times import Lap, StageTimes
from dataio.remote.readahead import Readahead

CHUNK = 32  # samples per decode task
_scratch = threading.local()  # each decode thread's uint8 image, normalised from there into the float batch


def _scratch_image(size: int, *, fresh: bool = False) -> np.ndarray:
    """The calling thread's (size, size, 3) uint8 scratch image; ``fresh``: a new one (``transform=`` kept a view of
    the last one, which is then the user's: its pixels must not change, as a kept view of a uint8 batch's slot
    holds that pooled batch)."""
    image = getattr(_scratch, "image", None)
    if fresh or image is None or image.shape[0] != size:
        image = _scratch.image = np.empty((size, size, 3), dtype=np.uint8)
    return image


class ImageBatchSource:
    """Batches of ``shards``' images as ``config`` crops them (train: random-resized, eval: centre): what every
    image kind reads; each kind's source adds its fields (``ClassBatchSource``: the label)."""

    check_sizes = False  # whether an image whose size is not its table row's fails (targets: ``table_size``)
    normalizes_on_host = True  # whether a CPU loader's normalisation may run here (its device stage then skips it)
    bucket_lengths: np.ndarray | None = None  # each sample's length, when the kind's batches group by it (captions)
    rectangular = False  # whether the kind's crops take image_size=(height, width) (boxes: DetectionBatchSource)

    def __init__(self, shards: ImageShards, config: ImageLoaderConfig, options: Any, times: StageTimes, *,
                 dali: DaliDecoder | None = None, threads: int = 0) -> None:
        if not self.rectangular:  # its square crops, centre crop and host normalisation take one side
            config.rectangular_refused(f"the crops of {kind_of(shards.manifest).what}")
        self.shards, self.config, self.options, self.times, self.dali = shards, config, options, times, dali
        self.transform = SampleTransform(config.transform) if config.transform is not None else None
        self.pin = config.pin_memory and torch.cuda.is_available()
        self.buffers = BufferPool(capacity=config.prefetch_batches * max(1, threads) + 4)
        self.readahead: Readahead | None = None  # remote: the current pass's fetches
        self.host_normalize = self._host_normalize(config, dali)

    def _host_normalize(self, config: ImageLoaderConfig, dali: DaliDecoder | None) -> HostNormalize | None:
        """The decode threads' normalisation: ``normalize=True`` on the CPU device, turbo, no device chain (which
        takes uint8 batches)."""
        c = config
        if (not self.normalizes_on_host or not c.normalize or dali is not None or c.device_augments
                or torch.device(c.device).type != "cpu"):
            return None
        return HostNormalize(c.mean, c.std, planar=not c.channels_last)

    def __len__(self) -> int:
        return len(self.shards)

    def begin_pass(self, plan: PassPlan) -> None:
        """Remote shards: the pass's batches fetched a few ahead of the decoders."""
        if self.shards.files.remote:
            c = self.config
            self.readahead = Readahead(lambda i: self.shards.fetch(plan.batch(i)[0]), len(plan),
                                       depth=c.readahead_batches, threads=c.readahead_threads)

    def end_pass(self) -> None:
        """Reads still in flight are let go, not waited for."""
        if self.readahead is not None:
            self.readahead.close()
            self.readahead = None

    def start_batch(self, index: int, keys: np.ndarray, key: SeedKey) -> BatchStart:
        c, table = self.config, self.shards.table
        size = c.decode_size_at(key.epoch)
        rng = np.random.default_rng([key.seed, key.epoch, key.rank, key.step])
        widths, heights = table.width[keys], table.height[keys]
        fields: dict[str, Any] = {}
        if c.train:
            boxes = crop_boxes.random_resized_crop_boxes(widths, heights, rng, c.crop_scale, c.crop_ratio)
            flipped = crop_boxes.flips(len(keys), rng, c.hflip)
            if c.crop_on_device:  # decode whole images; crop the mapped boxes on the device
                scale = np.stack([size / widths, size / heights] * 2, axis=1)
                fields["crop_boxes"], fields["crop_flips"] = boxes * scale, flipped
                boxes = np.stack([np.zeros(len(keys)), np.zeros(len(keys)), widths, heights], 1).astype(float)
                flipped = np.zeros(len(keys), dtype=bool)
        else:
            boxes = crop_boxes.center_crop_boxes(widths, heights, c.val_crop_ratio)
            flipped = np.zeros(len(keys), dtype=bool)
        # transform= with a generator parameter: one seed per sample, drawn after the crops (unchanged)
        seeds = rng.integers(0, 2**63 - 1, size=len(keys)) if self.transform and self.transform.seeded else None
        return self._image_tasks(index, keys, boxes, flipped, size, fields, seeds)

    def _image_tasks(self, index: int, keys: np.ndarray, boxes: np.ndarray, flipped: np.ndarray,
                     size: int | tuple[int, int], fields: dict[str, Any], seeds: np.ndarray | None,
                     places: np.ndarray | None = None) -> BatchStart:
        """The batch's ``image`` field (decoded from ``boxes`` and ``flipped`` at ``size``: a side, or (height, width)
        for the rectangular kinds, turbo only) and its read tasks (a kind's source adds its fields and tasks).
        ``places`` (N, 4) x0, y0, x1, y1: each image decoded into that part of its slot, the rest zeros (a
        keep-ratio letterbox, ``augment.letterbox``; turbo only)."""
        fetched = self.readahead.take(index) if self.readahead is not None else None  # remote: the batch's bytes
        if self.dali is not None:
            lap = self.times.lap()
            fields["image"] = torch.empty(0)
            return BatchStart(fields, [lambda: self._decode_dali(fields, keys, boxes, flipped, size, lap, fetched)],
                              laps=(lap,))
        height, width = (size, size) if isinstance(size, int) else size
        shape = (len(keys), height, width, 3)
        if self.host_normalize is not None:  # square kinds only (``rectangular`` is False where it runs)  # float slots, NCHW planes or channels_last; the field NHWC-shaped
            pixels = self.buffers.get((len(keys), *self.host_normalize.slot_shape(size)), np.float32)
            images = torch.from_numpy(pixels)
            images = images.permute(0, 2, 3, 1) if self.host_normalize.planar else images
        elif self.pin:  # torch's pinned host allocator caches and reuses these
            images = torch.empty(shape, dtype=torch.uint8, pin_memory=True)
            pixels = images.numpy()
        else:
            pixels = self.buffers.get(shape)
            images = torch.from_numpy(pixels)
        fields["image"] = images
        chunks = range(0, len(keys), CHUNK)
        laps = tuple(self.times.lap() for _ in chunks)  # one per task: each runs on one thread
        tasks = [(lambda lo=lo, lap=lap: self._decode(keys, boxes, flipped, pixels, lo, min(lo + CHUNK, len(keys)),
                                                      lap, fetched, seeds, places))
                 for lo, lap in zip(chunks, laps, strict=True)]
        return BatchStart(fields, tasks, laps=laps)

    def without(self, batch: HostBatch, positions: list[int]) -> HostBatch:
        return drop_samples(batch, positions)

    def _decode(self, keys, boxes, flipped, pixels, lo: int, hi: int, lap: Lap, fetched: Future | None,
                seeds: np.ndarray | None, places: np.ndarray | None = None) -> Failures:
        """Decode samples lo..hi-1 of a batch into its slots; returns the data errors as (position, error)."""
        failures = []
        c, table, normalize = self.config, self.shards.table, self.host_normalize
        scratch = _scratch_image(pixels.shape[2]) if normalize is not None else None  # (N, S, S, 3) or (N, 3, S, S)
        with lap("read"):  # remote: the batch's ranges, fetched ahead (waited for here if not there yet)
            data = fetched.result() if fetched is not None else [None] * len(keys)
        for i in range(lo, hi):
            sample = int(keys[i])
            try:
                with lap("read"):
                    encoded_bytes = self.shards.read(sample, data[i])
                expected = (int(table.width[sample]), int(table.height[sample])) if self.check_sizes else None
                image = pixels[i] if scratch is None else scratch
                into = image
                if places is not None:  # pooled slots hold an earlier batch's pixels: the padding is zeroed
                    image.fill(0)
                    x0, y0, x1, y1 = places[i].tolist()
                    into = image[y0:y1, x0:x1]
                decode_crop_into(encoded_bytes, boxes[i], bool(flipped[i]), into, fast_resize=c.fast_resize,
                                 reduced_decode=c.reduced_decode, region_decode=c.region_decode, lap=lap,
                                 expect_size=expected)
            except DATA_EXCEPTIONS as e:
                failures.append((i, self.shards.sample_error(sample, f"{type(e).__name__}: {e}")))
                continue
            if self.transform is not None:  # the user's code: its errors are not data errors
                refs = sys.getrefcount(image)  # a view the transform keeps holds one more (its tensor's storage)
                with lap("transform"):
                    self._apply_transform(image, sample, None if seeds is None else int(seeds[i]))
                if scratch is not None and sys.getrefcount(image) > refs:
                    scratch = _scratch_image(len(scratch), fresh=True)
            if normalize is not None:
                with lap("normalize"):
                    normalize(image, pixels[i])
        lap.items = hi - lo
        lap.flush()
        return failures

    def _apply_transform(self, slot: np.ndarray, sample: int, seed: int | None) -> None:
        """``transform=`` on one decoded slot; an exception it raises is re-raised naming the sample and shard."""
        try:
            self.transform(slot, seed, lambda: self.shards.where(sample))
        except ConfigError:
            raise  # dataio's own check of the result: it names the sample already
        except Exception as e:
            named = naming_the_sample(e, self.transform.fn, self.shards.where(sample))
            if named is e:
                raise
            raise named from e

    def _decode_dali(self, fields: dict[str, Any], keys, boxes, flipped, size: int, lap: Lap,
                     fetched: Future | None) -> Failures:
        """Fill ``fields["image"]`` with DALI; the decoder names the files it fails on.

        DALI decodes, crops and resizes in one pipeline run: timed as ``decode``.
        """
        encoded, failures = [], []
        with lap("read"):  # remote: the batch's ranges, fetched ahead (waited for here if not there yet)
            data = fetched.result() if fetched is not None else [None] * len(keys)
        table = self.shards.table
        for i, sample in enumerate(keys.tolist()):
            try:
                with lap("read"):
                    encoded_bytes = self.shards.read(sample, data[i])
                    if self.check_sizes:  # DALI reads the size itself: the header alone here (microseconds)
                        check_size(*header_size(encoded_bytes), (int(table.width[sample]), int(table.height[sample])))
                    encoded.append(np.frombuffer(encoded_bytes, dtype=np.uint8))
            except DATA_EXCEPTIONS as e:
                failures.append((i, self.shards.sample_error(sample, str(e))))
        unreadable = {i for i, _ in failures}
        readable = [i for i in range(len(keys)) if i not in unreadable]
        with lap("decode"):
            images, failed = self.dali.decode_each(encoded, boxes[readable], flipped[readable], size)
        lap.items = len(keys)
        lap.flush()
        failures += [(readable[i], self.shards.sample_error(int(keys[readable[i]]), reason)) for i, reason in failed]
        if unreadable:  # put the decoded images at their positions, zeros at the unreadable ones
            fields["image"] = torch.zeros((len(keys), size, size, 3), dtype=torch.uint8, device=images.device)
            fields["image"][readable] = images
        else:
            fields["image"] = images
        return failures

    def close(self) -> None:
        self.end_pass()
        self.buffers.clear()  # a closed loader still referenced must not keep capacity x a (float) batch
        if self.dali is not None:
            self.dali.close()
        self.shards.close()


class ClassBatchSource(ImageBatchSource):
    """Classification's source: the images and each one's ``label`` (N,) int64 (a mixture's: combined classes)."""

    def __init__(self, shards: ImageShards, config: ImageLoaderConfig, options: Any, times: StageTimes, *,
                 dali: DaliDecoder | None = None, threads: int = 0) -> None:
        if config.mix is not None and config.mix.num_classes < len(shards.manifest.classes):  # one-hot targets
            raise ConfigError(f"{{0}}.num_classes is {config.mix.num_classes}, fewer than the "
                              f"{len(shards.manifest.classes)} classes of {shards.folder}"
                              f"{' (combined)' if shards.mixture else ''}", "mix")
        super().__init__(shards, config, options, times, dali=dali, threads=threads)

    def start_batch(self, index: int, keys: np.ndarray, key: SeedKey) -> BatchStart:
        labels = self.shards.table.label
        begun = super().start_batch(index, keys, key)
        begun.fields["label"] = (torch.full((len(keys),), -1, dtype=torch.int64) if labels is None  # images alone
                                 else torch.from_numpy(labels[keys].astype(np.int64)))  # faulty rows: dropped
        return begun


def dali_decoder(config: ImageLoaderConfig) -> DaliDecoder:
    """The DALI decoder for ``config``: on its GPU (or the CPU), sized for the largest batch of its schedule."""
    c = config
    device = torch.device(c.device)
    device_id = (device.index or 0) if device.type == "cuda" else None
    max_batch = max(c.schedule.batch_size_at(e) for e in range(c.schedule.epochs)) if c.schedule else c.batch_size
    return DaliDecoder(max_batch=max_batch, threads=c.threads or 1, device_id=device_id,
                       hw_decoder_load=c.hw_decoder_load, seed=c.seed)
