"""The source of multi-crop views: each image read and decoded once, its global and local views cropped from it.

``start_batch`` draws every view's RandomResizedCrop box and flip from the generator seeded by the batch's key (as
the image source draws its crops: the same on any thread count and after a resume), and each view group's
photometric draws (``augment.view_params.draw_view_params``, seeded from the same key). Read tasks of ``CHUNK``
samples decode each image once into all its views (``view_decode``). On the CPU device the photometric ops and
the normalisation run there too, per view, while its pixels are in cache (``augment.views_kernel.apply_view``, the C
kernel, with the GIL released on several decode threads), into a float32 batch from the buffer pool; on a GPU (or
with DALI) the views stay uint8 and the finish applies the same draws there, batched (``view_finish``). Views are
laid out view-major (``view_stack``), as DINOv2's collate lays them.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import numpy as np
import torch

from dataio.augment import SeedKey
from dataio.augment.crop_boxes import flips, random_resized_crop_boxes
from dataio.augment.seeding import derive_seed
from dataio.augment.view_params import ViewParams, draw_view_params
from dataio.augment.views_kernel import apply_view
from dataio.formats.errors import ConfigError
from dataio.images.config import ImageLoaderConfig
from dataio.images.dali_decode import DaliDecoder
from dataio.images.image_batches import CHUNK, ImageBatchSource
from dataio.images.image_shards import ImageShards
from dataio.pipeline.error_policy import DATA_EXCEPTIONS
from dataio.pipeline.sample_source import BatchStart, Failures
from dataio.pipeline.stage_times import Lap, StageTimes
from dataio.views.view_dali import ViewsDali
from dataio.views.view_decode import decode_views
from dataio.views.view_stack import ViewStack
from dataio.views.views_config import ViewsConfig

VIEWS_STREAM = 5  # augment.seeding streams: 1 RandAugment, 2 mix, 3 crop, 4 batch_transform, 5 the views' draws
GLOBAL, LOCAL = "collated_global_crops", "collated_local_crops"  # DINOv2's collate's names
REFUSED = ("randaugment", "mix", "crop_on_device", "schedule", "transform", "color_jitter", "re_prob")  # views have their own crops and ops
# The image loader's crop options, which views take from ViewsConfig instead: given, they would be ignored
INSTEAD = {"image_size": "global_size and local_size", "crop_scale": "global_scale and local_scale",
           "crop_ratio": "ratio", "hflip": "hflip", "val_crop_ratio": "global_scale", "decode_size": "global_size",
           "fast_resize": None, "region_decode": None}
_scratch = threading.local()  # each decode thread's uint8 views, put through the photometric ops from there


def _scratch_views(sizes: list[int]) -> list[np.ndarray]:
    """The calling thread's uint8 (S, S, 3) image for each view size in ``sizes``."""
    held = getattr(_scratch, "views", None)
    if held is None or [len(image) for image in held] != sizes:
        held = _scratch.views = [np.empty((size, size, 3), np.uint8) for size in sizes]
    return held


class ViewBatchSource(ImageBatchSource):
    """Batches of ``options`` views (``ViewsConfig``) of ``shards``' images, with each sample's ``label`` when the
    folder has classes."""

    normalizes_on_host = False  # the views normalise in their own kernel (or finish), not the image source's
    check_sizes = True  # the views' boxes are drawn in the table's size: an image of another size fails (table_size)

    def __init__(self, shards: ImageShards, config: ImageLoaderConfig, options: ViewsConfig | None,
                 times: StageTimes, *, dali: DaliDecoder | None = None, threads: int = 0) -> None:
        given = [name for name in REFUSED if getattr(config, name)]
        if given:
            raise ConfigError("{0} is not for multi-crop views, which crop, flip and colour each view themselves "
                              "(dataio.ViewsConfig)", given[0])
        defaults = ImageLoaderConfig()
        ignored = [name for name in INSTEAD if getattr(config, name) != getattr(defaults, name)]
        if ignored:
            field = INSTEAD[ignored[0]]
            raise ConfigError(f"{{0}} is not for multi-crop views, whose crops ViewsConfig sets"
                              f"{f' (its {field})' if field else ''}", ignored[0])
        options = options or ViewsConfig()
        super().__init__(shards, config, options, times, dali=dali, threads=threads)
        self.views = options
        self.on_host = torch.device(config.device).type == "cpu" and dali is None  # photometric ops on the threads
        self.views_dali = ViewsDali(dali, options) if dali is not None else None
        self.decodes = 0  # images decoded (each once per epoch: ``dataio bench views`` reports it)
        self._count = threading.Lock()

    def start_batch(self, index: int, keys: np.ndarray, key: SeedKey) -> BatchStart:
        v, table, n = self.views, self.shards.table, len(keys)
        rng = np.random.default_rng([key.seed, key.epoch, key.rank, key.step])
        widths, heights = table.width[keys], table.height[keys]
        boxes = np.stack([random_resized_crop_boxes(widths, heights, rng, v.global_scale if view < v.global_crops
                                                    else v.local_scale, v.ratio) for view in range(v.views)])
        flipped = np.stack([flips(n, rng, v.hflip) for _ in range(v.views)])  # (views, N)
        generator = torch.Generator().manual_seed(derive_seed(key, VIEWS_STREAM))
        stacks = {GLOBAL: self._stack(v.global_crops, v.global_size, n, ViewParams.cat(
            [draw_view_params(v.recipe(view), n, generator) for view in range(v.global_crops)]))}
        if v.local_crops:
            stacks[LOCAL] = self._stack(v.local_crops, v.local_size, n,
                                        draw_view_params(v.local_recipe, v.local_crops * n, generator))
        fields: dict[str, Any] = dict(stacks)
        if table.label is not None:  # a classification folder's labels (a linear probe or kNN monitor reads them)
            fields["label"] = torch.from_numpy(table.label[keys].astype(np.int64))
        fetched = self.readahead.take(index) if self.readahead is not None else None
        if self.views_dali is not None:
            lap = self.times.lap()
            return BatchStart(fields, [lambda: self.views_dali.decode(self, fields, keys, boxes, flipped, lap,
                                                                      fetched)], laps=(lap,))
        chunks = range(0, n, CHUNK)
        laps = tuple(self.times.lap() for _ in chunks)
        tasks = [(lambda lo=lo, lap=lap: self._decode(keys, boxes, flipped, stacks, lo, min(lo + CHUNK, n), lap,
                                                      fetched)) for lo, lap in zip(chunks, laps, strict=True)]
        return BatchStart(fields, tasks, laps=laps)

    def _stack(self, views: int, size: int, n: int, params: ViewParams) -> ViewStack:
        """The batch's views of one size, allocated: float32 normalised (NHWC or planes) when the threads apply
        the ops and the loader normalises, else uint8 NHWC."""
        c = self.config
        if self.on_host and c.normalize:
            shape = (views * n, size, size, 3) if c.channels_last else (views * n, 3, size, size)
            return ViewStack(self.buffers.get(shape, np.float32), views, params, applied=True)
        shape = (views * n, size, size, 3)
        if self.pin:  # copied to the GPU on a side stream: torch's pinned host allocator caches and reuses these
            return ViewStack(torch.empty(shape, dtype=torch.uint8, pin_memory=True).numpy(), views, params, False)
        return ViewStack(self.buffers.get(shape), views, params, applied=self.on_host)

    def _decode(self, keys: np.ndarray, boxes: np.ndarray, flipped: np.ndarray, stacks: dict[str, ViewStack],
                lo: int, hi: int, lap: Lap, fetched: Future | None) -> Failures:
        """Samples lo..hi-1: each decoded once into its views; returns the data errors as (position, error)."""
        failures: Failures = []
        c, v, n = self.config, self.views, len(keys)
        groups = [(stacks[GLOBAL], view, v.global_size) for view in range(v.global_crops)]  # globals, then locals
        groups += [(stacks[LOCAL], view, v.local_size) for view in range(v.local_crops)]
        scratch = _scratch_views([size for _, _, size in groups]) if self.on_host else None
        with lap("read"):  # remote: the batch's ranges, fetched ahead (waited for here if not there yet)
            data = fetched.result() if fetched is not None else [None] * n
        decoded = 0
        for i in range(lo, hi):
            sample = int(keys[i])
            outs = scratch if scratch is not None else [stack.array[view * n + i] for stack, view, _ in groups]
            try:
                with lap("read"):
                    encoded = self.shards.read(sample, data[i])
                expected = (int(self.shards.table.width[sample]), int(self.shards.table.height[sample]))
                decode_views(encoded, boxes[:, i], flipped[:, i], outs, reduced_decode=c.reduced_decode, lap=lap,
                             expect_size=expected)
            except DATA_EXCEPTIONS as e:
                failures.append((i, self.shards.sample_error(sample, f"{type(e).__name__}: {e}")))
                continue
            decoded += 1
            if scratch is not None:
                with lap("views"):
                    for (stack, view, _), image in zip(groups, scratch, strict=True):
                        row = view * n + i
                        apply_view(image, stack.params, row, stack.array[row], **self._normalisation(stack))
        with self._count:
            self.decodes += decoded
        lap.items = hi - lo
        lap.flush()
        return failures

    def _normalisation(self, stack: ViewStack) -> dict[str, Any]:
        """``apply_view``'s output options for ``stack``: uint8, or float32 normalised in its layout."""
        c = self.config
        if not c.normalize:
            return {}
        return {"mean": c.mean, "std": c.std, "planar": not c.channels_last}

    def close(self) -> None:
        super().close()
        if self.views_dali is not None:
            self.views_dali.close()
