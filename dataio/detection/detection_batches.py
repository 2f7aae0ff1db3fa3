"""The image loader's source for samples with box and mask targets: the image source's decode, its targets moved
through the same crop, resize and flip.

``start_batch`` draws the batch's crops from the generator seeded by its key, as
the image source does: the detection crop (``augment.bbox_crop``: SSD's
overlap-constrained windows, DALI's ``random_bbox_crop``, boxes whose centre
falls outside dropped) or RandomResizedCrop, then the flips; evaluation takes the
whole image (or the centre crop). The images are decoded by the image source's
tasks (turbo or DALI, ``_image_tasks``). The targets follow the parameters the
decoder took (``augment.target_maps``: turbo's clamped boxes, DALI's rounded
ones; with ``crop_on_device`` the decode's map, then the device crop's): one
task maps the batch's boxes (``BoxTargets``, vectorised), and with masks each
decode task's samples get theirs (decoded from RLE, ``coco_rle``, and resampled
nearest-neighbour at the output size). RandAugment, the box filter and padding
happen after the copy (``detection_finish``). A sample's failures are found in
its read tasks, where the error policy can drop it: an image whose header size
is not the table's (``table_size``: its boxes would be mapped wrong), more boxes
than ``max_boxes`` (``max_boxes``). The tasks close over the
batch's dicts, never over its ``BatchStart`` (no reference cycle: see
``text.token_batches``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataio.augment import SeedKey
from dataio.augment.bbox_crop import bbox_crop_boxes
from dataio.augment.box_targets import BoxTargets
from dataio.augment.crop_boxes import center_crop_boxes, flips, random_resized_crop_boxes
from dataio.augment.keypoint_targets import map_sample_keypoints
from dataio.augment.letterbox import letterbox_maps, letterbox_places
from dataio.augment.mix import refuse_with_box_targets
from dataio.augment.timm_strings import TimmRandAugmentConfig
from dataio.formats.errors import ConfigError
from dataio.augment.target_maps import crop_resize_maps, decoded_crop_boxes, device_crop_maps
from dataio.detection.batch_targets import BatchTargets
from dataio.images.config import ImageLoaderConfig
from dataio.images.dali_decode import DaliDecoder
from dataio.detection.detection_config import DetectionConfig
from dataio.images.image_batches import CHUNK, ImageBatchSource
from dataio.images.image_shards import ImageShards
from dataio.detection.max_boxes import over_max_boxes
from dataio.detection.target_columns import BatchObjects, TargetColumns
from dataio.formats.errors import ConfigError
from dataio.pipeline.sample_source import BatchStart, Failures
from dataio.pipeline.stage_times import Lap, StageTimes


class DetectionBatchSource(ImageBatchSource):
    """Batches of images with their box (and mask) targets, as ``config.targets`` says (``DetectionConfig``)."""

    check_sizes = True  # targets are mapped in the table's size: an image of another size fails (``table_size``)
    normalizes_on_host = False  # DetectionTransfer normalises after its device crop and RandAugment
    rectangular = True  # image_size=(height, width): every view's maps take the output's two sides

    def __init__(self, shards: ImageShards, config: ImageLoaderConfig, options: DetectionConfig | None,
                 times: StageTimes, *, dali: DaliDecoder | None = None, threads: int = 0) -> None:
        refuse_with_box_targets(config.mix)  # MixUp/CutMix has no rule for boxes
        timm_ops = [name for name in ("color_jitter", "re_prob") if getattr(config, name)]
        if isinstance(config.randaugment, TimmRandAugmentConfig) or timm_ops:  # the detection finish runs neither
            raise ConfigError("{0} (timm's RandAugment, colour jitter, erasing) are for classification and pairs; "
                              "boxes follow dataio's RandAugmentConfig", (timm_ops or ["randaugment"])[0])
        options = options or DetectionConfig()
        super().__init__(shards, config, options, times, dali=dali, threads=threads)
        self.detection = options
        self.letterbox = options.crop == "flip" if config.train else options.eval_crop == "letterbox"
        if self.letterbox and (config.crop_on_device or dali is not None):  # both crop square windows of the image
            raise ConfigError(f"{{0}}: {'crop=flip' if config.train else 'eval_crop=letterbox'} (a keep-ratio view) "
                              "is decoded by turbo on the host: leave out crop_on_device and decoder='dali'", "targets")
        self.columns = TargetColumns(shards, self.detection.masks, self.detection.require_masks)
        self.keypoint_flips = self.columns.keypoint_flips  # a flip swaps left and right points

    def start_batch(self, index: int, keys: np.ndarray, key: SeedKey) -> BatchStart:
        c, d, table = self.config, self.detection, self.shards.table
        size, out = c.decode_size_at(key.epoch), c.image_size_at(key.epoch)
        out_h, out_w = c.output_shape_at(key.epoch)  # (out, out) but for image_size=(H, W) (no device crop there)
        rng = np.random.default_rng([key.seed, key.epoch, key.rank, key.step])
        n = len(keys)
        widths, heights = table.width[keys].astype(np.float64), table.height[keys].astype(np.float64)
        objects = self.columns.objects(keys)
        whole = np.stack([np.zeros(n), np.zeros(n), widths, heights], axis=1)
        kept = np.ones(len(objects.labels), dtype=bool)
        places = letterbox_places(widths, heights, (out_h, out_w)) if self.letterbox else None
        if c.train:
            if places is not None:
                crops = whole
            elif d.crop == "bbox":
                crops, kept = bbox_crop_boxes(widths, heights, objects.boxes, objects.counts, rng, d.bbox_crop)
            else:
                crops = random_resized_crop_boxes(widths, heights, rng, c.crop_scale, c.crop_ratio)
            flipped = flips(n, rng, c.hflip)
        else:
            # the letterbox decodes the whole image too (its places say where): only "centre" cuts
            crops = center_crop_boxes(widths, heights, c.val_crop_ratio, out_w / out_h) if d.eval_crop == "centre" \
                else whole
            flipped = np.zeros(n, dtype=bool)
        seeds = rng.integers(0, 2**63 - 1, size=n) if self.transform and self.transform.seeded else None
        fields: dict[str, Any] = {}
        decoded, decoded_flips = crops, flipped
        if c.crop_on_device:  # the whole image decoded at size x size, cropped on the device
            fields["crop_boxes"] = crops * np.stack([size / widths, size / heights] * 2, axis=1)
            fields["crop_flips"] = flipped
            decoded, decoded_flips = whole, np.zeros(n, dtype=bool)
        decode_shape = size if out_h == out_w else (out_h, out_w)  # a pair: turbo alone (DALI takes a side)
        start = self._image_tasks(index, keys, decoded, decoded_flips, decode_shape, fields, seeds, places)
        if places is not None:
            maps = letterbox_maps(places, widths, heights, flipped)
        else:
            taken = np.round(decoded) if self.dali is not None else decoded_crop_boxes(decoded, widths, heights)
            maps = crop_resize_maps(taken, decoded_flips, *((size, size) if c.crop_on_device else (out_w, out_h)))
        if c.crop_on_device:
            maps = device_crop_maps(fields["crop_boxes"], flipped, out) @ maps
        if not c.train:  # where each image went: evaluation maps its detections back (``map_back``)
            start.fields["frames"] = np.stack([heights, widths, maps[:, 0, 0], maps[:, 1, 1], maps[:, 0, 2],
                                               maps[:, 1, 2]], axis=1)
        rows = np.flatnonzero(kept)
        owners = np.repeat(np.arange(n), objects.counts)[rows]
        bounds = np.concatenate([[0], np.cumsum(np.bincount(owners, minlength=n))])
        masks = np.zeros((len(rows), out_h, out_w), np.uint8) if d.masks else None
        fields = start.fields
        lap = self.times.lap()
        tasks = [lambda: self._map_boxes(fields, objects, kept, keys, widths, heights, maps, (out_h, out_w), masks,
                                         lap)]
        laps = [lap]
        if masks is not None:
            for lo in range(0, n, CHUNK):
                laps.append(self.times.lap())
                tasks.append(lambda lo=lo, lap=laps[-1]: self._masks(keys, objects, rows, bounds, maps, masks, lo,
                                                                     min(lo + CHUNK, n), lap))
        return BatchStart(fields, [*start.tasks, *tasks], laps=(*start.laps, *laps))

    def _map_boxes(self, fields: dict[str, Any], objects: BatchObjects, kept: np.ndarray, keys: np.ndarray,
                   widths: np.ndarray, heights: np.ndarray, maps: np.ndarray, out: tuple[int, int],
                   masks: np.ndarray | None, lap: Lap) -> Failures:
        """The batch's boxes in the output's pixels (their visible polygons: ``BoxTargets``) and their keypoints by
        the same maps, as its ``targets`` field (ragged rows: ``BatchTargets`` drops a failed sample's rows with it)."""
        with lap("targets"):
            boxes = BoxTargets.from_ragged(objects.boxes, objects.labels, objects.counts, widths, heights)
            out_h, out_w = out
            boxes = boxes.select(kept).mapped(maps, out_w, out_h)
            keypoints = None if objects.keypoints is None else map_sample_keypoints(
                objects.keypoints[kept], boxes.owners(), maps, out_w, out_h, self.keypoint_flips)
            fields["targets"] = BatchTargets(boxes, objects.iscrowd[kept], masks, self.columns.image_ids(keys),
                                             keypoints)
            failures = over_max_boxes(boxes, objects.iscrowd[kept], self.detection, keys, self.shards.sample_error,
                                      warped=self.config.randaugment is not None)
        lap.flush()
        return failures

    def _masks(self, keys: np.ndarray, objects: BatchObjects, rows: np.ndarray, bounds: np.ndarray,
               maps: np.ndarray, masks: np.ndarray, lo: int, hi: int, lap: Lap) -> Failures:
        """Samples lo..hi-1's masks, decoded and resampled through their maps into ``masks``; a mask that does
        not decode is its sample's failure."""
        failures = []
        with lap("masks"):
            for i in range(lo, hi):
                first, last = int(bounds[i]), int(bounds[i + 1])
                if first == last:
                    continue
                sample = int(keys[i])
                assert objects.mask_rows is not None and objects.mask_parts is not None
                mine = rows[first:last]
                try:
                    masks[first:last] = self.columns.resampled_masks(objects.mask_parts[mine],
                                                                     objects.mask_rows[mine], sample, maps[i],
                                                                     masks.shape[1:])
                except ValueError as e:
                    failures.append((i, self.shards.sample_error(sample, f"mask: {e}")))
        lap.items = hi - lo
        lap.flush()
        return failures
