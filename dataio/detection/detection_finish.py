"""The device finish of batches with box targets: the images as ``ImageFinish`` lays them out, the targets
through the same device crop and RandAugment draws, filtered, padded, as one dict.

After the copy, a batch's images take the loader's device crop (``crop_on_device``:
its boxes and masks were already mapped through it on the host) and
RandAugment, whose ops and magnitudes are drawn once for images and targets
(``RandAugment.draw``, seeded by the batch's key as ``DeviceAugment`` seeds
it): boxes go through each slot's map (``target_maps.randaugment_maps``, each
clipping the visible polygon), masks are warped nearest-neighbour on the
device (``mask_targets.warp_masks``). Then boxes left with less than
``min_visible`` of their area, or a side of ``min_side`` pixels or less, are
dropped with their masks (and crowd boxes with ``crowd=False``), and the rest
padded. The dict (``docs/detection.md``):

- ``image`` (N, 3, S, S) (or (N, 3, H, W) for ``image_size=(H, W)``), as the loader's ``normalize`` and ``channels_last`` and
  ``DetectionConfig.pixels`` say (float32 in [0, 1] by default);
- ``boxes`` (N, K, 4) float32 x0, y0, x1, y1 in output pixels (continuous:
  pixel ``i`` spans ``[i, i + 1)``), K the batch's largest count or ``max_boxes``;
- ``labels`` (N, K) int64, -1 where padded; ``valid`` (N, K) bool;
  ``num_boxes`` (N,) int64; ``iscrowd`` (N, K) bool;
- ``masks`` (with ``masks=True``): (M, S, S) uint8, M = ``num_boxes.sum()``,
  row ``j`` the mask of the ``j``-th valid box in (sample, slot) order, so
  ``masks`` lines up with ``boxes[valid]``;
- ``keypoints`` (a folder with COCO keypoints): (N, K, P, 3) float32 x, y, visibility in
  output pixels, lined up with ``boxes`` (``keypoints[i][valid[i]]`` is torchvision's
  keypoint R-CNN target); points outside the output have visibility 0;
- ``image_id`` (N,) COCO's ids, ``sample_ids`` and ``repeated`` (N,) as the
  loader's ``batches()`` give them;
- evaluation (``train=False``): ``orig_size`` (N, 2) int64 each image's H, W,
  ``scale`` (N, 2) float32 x, y factors and ``offset`` (N, 2) float32 x, y
  pixels: a point of the image is at ``point * scale + offset`` in the output
  (``map_back.to_original`` inverts it for COCOeval).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from dataio.augment.chain import CropBoxes, EpochSizedCrop, Normalize
from dataio.augment.keypoint_targets import map_keypoints_in_slots, padded_keypoints
from dataio.augment.mask_targets import warp_masks
from dataio.augment.randaugment import RandAugment
from dataio.augment.target_maps import randaugment_maps
from dataio.detection.batch_targets import BatchTargets
from dataio.images.config import ImageLoaderConfig
from dataio.detection.detection_config import DetectionConfig
from dataio.pipeline.hook_sizes import checked_dict
from dataio.pipeline.host_batch import HostBatch


class DetectionFinish:
    """``finish(moved, host) -> dict`` (module docstring) on ``config.device``."""

    stage = "augment"

    def __init__(self, config: ImageLoaderConfig, options: DetectionConfig | None, source: Any) -> None:
        c = config
        self.sample_error: Callable[[int, str], Exception] = source.shards.sample_error  # names a sample
        self.device, self.detection = torch.device(c.device), options or DetectionConfig()
        self.normalize = Normalize(c.mean, c.std) if c.normalize else None
        self.memory_format = torch.channels_last if c.channels_last else torch.contiguous_format
        self.crop = EpochSizedCrop(c.image_size, schedule=c.schedule, scale=c.crop_scale, ratio=c.crop_ratio,
                                   hflip=c.hflip) if c.crop_on_device else None
        self.randaugment = RandAugment(dataclasses.replace(c.randaugment, output="float")) if c.randaugment else None
        self.keypoint_flips = source.columns.keypoint_flips

    def fields(self, host: HostBatch) -> dict[str, Any]:
        return {"image": host.fields["image"]}  # the targets stay on the host until they are mapped and padded

    def __call__(self, moved: dict[str, Any], host: HostBatch) -> dict[str, torch.Tensor]:
        targets: BatchTargets = host.fields["targets"]
        images = moved["image"].permute(0, 3, 1, 2)
        masks = None if targets.masks is None else torch.from_numpy(targets.masks).to(self.device)
        images, boxes, masks, keep, keypoints = self._augment(images, targets, masks, host)
        out = self._padded(boxes, targets.iscrowd[keep], masks, host)
        if keypoints is not None:  # torchvision's keypoint R-CNN target per sample: keypoints[i][valid[i]] (K_i, P, 3)
            out["keypoints"] = torch.from_numpy(padded_keypoints(keypoints, boxes.offsets, out["valid"].shape[1]))
            out["keypoints"] = out["keypoints"].to(self.device, non_blocking=True)
        out["image"] = self._finish(images)
        out.update(image_id=torch.from_numpy(targets.image_id), sample_ids=torch.from_numpy(host.samples),
                   repeated=torch.from_numpy(host.repeated))
        frames = host.fields.get("frames")
        if frames is not None:
            out.update(orig_size=torch.from_numpy(frames[:, :2].astype(np.int64)),
                       scale=torch.from_numpy(frames[:, 2:4].astype(np.float32)),
                       offset=torch.from_numpy(frames[:, 4:].astype(np.float32)))
        return out

    def checked(self, out: Any, rows: int, given: Any = None) -> dict:
        """``batch_transform(dict)``'s result; ``masks`` has a row per box, the other fields a row per sample."""
        return checked_dict(out, rows, per_object=frozenset({"masks"}), given=given)

    def _augment(self, images: torch.Tensor, targets: BatchTargets, masks: torch.Tensor | None,
                 batch: HostBatch) -> tuple:
        """The device crop and RandAugment on the images, RandAugment's draws on the targets; the kept rows."""
        boxes, keypoints = targets.boxes, targets.keypoints
        if self.crop is not None:
            self.crop.seed_for(batch.key)
            images = self.crop(images, CropBoxes(boxes=batch.fields["crop_boxes"], flipped=batch.fields["crop_flips"]))
            if self.randaugment is not None and self.randaugment.uses_kernel(images.device, torch.uint8):
                images = images.round_().to(torch.uint8)  # the kernel's uint8 path, as DeviceAugment takes it
        if self.randaugment is not None:
            self.randaugment.seed_for(batch.key)
            height, width = images.shape[-2:]  # (H, W): image_size=(height, width) gives rectangles
            draws = self.randaugment.draw(len(images))
            whole = self.randaugment.uses_kernel(images.device, images.dtype)
            images = self.randaugment(images, output="uint8" if whole else None, draws=draws)
            slot_maps = randaugment_maps(draws, height, width)
            if keypoints is not None:
                keypoints = map_keypoints_in_slots(keypoints, boxes.owners(), slot_maps, width, height,
                                                   self.keypoint_flips)
            boxes = boxes.mapped_in_slots(slot_maps, width, height)
            if masks is not None:
                masks = warp_masks(masks, boxes.offsets, slot_maps)
        d = self.detection
        boxes, rows = boxes.kept(d.min_visible, d.min_side)
        if not d.crowd:
            not_crowd = ~targets.iscrowd[rows]
            boxes, rows = boxes.select(not_crowd), rows[not_crowd]
        if masks is not None:
            masks = masks[torch.from_numpy(rows).to(masks.device)]
        return images, boxes, masks, rows, None if keypoints is None else keypoints[rows]

    def _padded(self, boxes, iscrowd: np.ndarray, masks: torch.Tensor | None,
                batch: HostBatch) -> dict[str, torch.Tensor]:
        limit, counts = self.detection.max_boxes, np.diff(boxes.offsets)
        if limit is not None and self.sample_error is not None and counts.max(initial=0) > limit:
            # never reached: the source fails such a sample in its read task (``max_boxes``), counting an upper
            # bound of this count; kept so that a change there cannot cut boxes silently
            worst = int(np.argmax(counts))
            raise self.sample_error(int(batch.samples[worst]), f"{int(counts[worst])} boxes after its crop and "
                                    f"filters, more than max_boxes={limit}")
        padded, labels, valid = boxes.padded(limit)
        crowd = np.zeros(valid.shape, bool)
        crowd[valid] = iscrowd
        out = {name: torch.from_numpy(value).to(self.device, non_blocking=True) for name, value in
               (("boxes", padded), ("labels", labels), ("valid", valid), ("iscrowd", crowd),
                ("num_boxes", valid.sum(axis=1).astype(np.int64)))}
        if masks is not None:
            out["masks"] = masks
        return out

    def _finish(self, images: torch.Tensor) -> torch.Tensor:
        if self.normalize is not None:
            return self.normalize(images, self.memory_format)
        if images.is_floating_point():
            images = images.round().clamp_(0, 255).to(torch.uint8)
        if self.detection.pixels == "float":  # torchvision's detection models take [0, 1] and normalise themselves
            images = images.to(torch.float32).div_(255)
        return images.contiguous(memory_format=self.memory_format)
