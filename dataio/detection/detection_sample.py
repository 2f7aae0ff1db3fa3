"""``ShardDataset[i]`` of a folder with box targets: one sample as a dict, as the loader's evaluation view gives it.

Without ``image_size``, the whole image (uint8 (3, H, W), or PIL) with its
objects in its own pixels; with it, the loader's evaluation crop (the whole
image resized to S x S or, for ``image_size=(H, W)``, H x W, or the centre crop: ``DetectionConfig.eval_crop``) and
the targets through the same map, filtered by ``min_visible`` as the loader's
are (``eval_crop="letterbox"``: the loader's keep-ratio view). Where torchvision
imports, ``boxes`` are ``tv_tensors.BoundingBoxes`` and ``masks`` ``tv_tensors.Mask``
(``tv_targets``), so a v2 ``transform=`` moves them with the image. Keys: ``image``, ``boxes`` (K, 4) float32 xyxy, ``labels`` (K,) int64,
``iscrowd`` (K,) bool, ``image_id`` (an int), and ``masks`` (K, H, W) uint8 when
``DetectionConfig.masks`` asks, ``keypoints`` (K, P, 3) float32 x, y, visibility where the folder
has COCO keypoints (moved with the boxes; visibility 0 outside the view): torchvision's detection
target form, with the image in the same dict.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from PIL import Image

from dataio.augment import Normalize
from dataio.augment.box_targets import BoxTargets
from dataio.augment.crop_boxes import center_crop_boxes
from dataio.augment.keypoint_targets import map_sample_keypoints
from dataio.augment.letterbox import letterbox_maps, letterbox_places
from dataio.augment.target_maps import crop_resize_maps
from dataio.detection.detection_config import DetectionConfig
from dataio.images.image_shards import ImageShards
from dataio.images.table_size import check_size
from dataio.detection.target_columns import TargetColumns
from dataio.detection.tv_targets import as_tv_tensors
from dataio.images.turbo_decode import decode_crop_into, decode_image


def detection_sample(reader: ImageShards, columns: TargetColumns, index: int, targets: DetectionConfig,
                     image_size: int | tuple[int, int] | None, *, val_crop_ratio: float, to_pil: bool,
                     decode: dict[str, bool]) -> dict:
    """Sample ``index`` read (checked), decoded and with its targets; raises data errors (ValueError, OSError), an
    image whose size is not the table's (its targets' frame) among them (``table_size``)."""
    data = reader.read(index)
    ids = np.array([index])
    objects = columns.objects(ids)
    width, height = int(reader.table.width[index]), int(reader.table.height[index])
    masks = np.zeros((0, height, width), np.uint8)
    out_h, out_w = ((height, width) if image_size is None else (image_size, image_size) if isinstance(image_size, int)
                    else image_size)  # the output's sides: the image's own, or the view's (H, W)
    if image_size is None:
        if targets.masks and len(objects.labels):  # the whole image's own pixels: (K, H, W), torchvision's form
            masks = np.stack([columns.mask(int(part), int(row), index) for part, row in
                              zip(objects.mask_parts, objects.mask_rows, strict=True)])
        pixels: Any = decode_image(data, to_pil=to_pil)
        check_size(*(pixels.size if to_pil else pixels.shape[1::-1]), (width, height))  # boxes are in its pixels
        boxes, labels, iscrowd, keypoints = objects.boxes, objects.labels, objects.iscrowd, objects.keypoints
    else:
        w, h = np.array([width], np.float64), np.array([height], np.float64)
        box = (np.array([[0.0, 0.0, width, height]]) if targets.eval_crop != "centre"
               else center_crop_boxes(w, h, val_crop_ratio, out_w / out_h))
        pixels = np.zeros((out_h, out_w, 3), dtype=np.uint8)
        if targets.eval_crop == "letterbox":  # the loader's keep-ratio view: the image in its place, zeros around
            place = letterbox_places(w, h, (out_h, out_w))
            x0, y0, x1, y1 = place[0].tolist()
            decode_crop_into(data, box[0], False, pixels[y0:y1, x0:x1], **decode, expect_size=(width, height))
            maps = letterbox_maps(place, w, h, np.zeros(1, bool))
        else:
            decode_crop_into(data, box[0], False, pixels, **decode, expect_size=(width, height))
            maps = crop_resize_maps(box, np.zeros(1, bool), out_w, out_h)
        moved, rows = (BoxTargets.from_ragged(objects.boxes, objects.labels, objects.counts, w, h)
                       .mapped(maps, out_w, out_h).kept(targets.min_visible, targets.min_side))
        boxes, labels, iscrowd = moved.boxes(), moved.labels, objects.iscrowd[rows]
        keypoints = None if objects.keypoints is None else map_sample_keypoints(
            objects.keypoints, np.zeros(len(objects.labels), np.int64), maps, out_w, out_h,
            columns.keypoint_flips)[rows]
        if targets.masks:
            masks = columns.resampled_masks(objects.mask_parts[rows], objects.mask_rows[rows], index, maps[0],
                                            (out_h, out_w))
        pixels = Image.fromarray(pixels) if to_pil else pixels
    keep = np.ones(len(labels), bool) if targets.crowd else ~iscrowd
    sample = {"image": pixels if to_pil else torch.from_numpy(np.ascontiguousarray(pixels)).permute(2, 0, 1),
              "boxes": torch.from_numpy(np.ascontiguousarray(boxes[keep], np.float32)),
              "labels": torch.from_numpy(labels[keep].astype(np.int64)),
              "iscrowd": torch.from_numpy(iscrowd[keep]), "image_id": int(columns.image_ids(ids)[0])}
    if targets.masks:
        sample["masks"] = torch.from_numpy(np.ascontiguousarray(masks[keep]))
    if keypoints is not None:  # torchvision's keypoint R-CNN target: (K, P, 3) x, y, visibility
        sample["keypoints"] = torch.from_numpy(np.ascontiguousarray(keypoints[keep], np.float32))
    return as_tv_tensors(sample, out_h, out_w)  # BoundingBoxes and Mask where torchvision imports: v2 moves them


class DetectionItem:
    """A box folder's item: the dict above, normalised with the data set's ``normalize``; ``transform`` takes the
    whole dict (torchvision v2's way), and there is no ``target_transform`` (the targets are in the dict).

    With ``DetectionConfig(layout="torchvision")`` the item is ``(image, target)``, as torchvision's
    ``CocoDetection`` (wrapped for v2) gives it and references/detection's loop unpacks it: the target is the dict
    without its image, its labels plus one (label 0 is the background of torchvision's models, as the loader's
    layout holds them), and ``transform(image, target)`` is called as a torchvision data set's ``transforms``."""

    takes_target_transform = False
    kind = "detection"

    def __init__(self, reader: ImageShards, config: Any, options: DetectionConfig | None) -> None:
        self.reader, self.config, self.targets = reader, config, options or DetectionConfig()
        self.columns = TargetColumns(reader, self.targets.masks, self.targets.require_masks)
        self.normalize = Normalize(config.mean, config.std) if config.normalize else None

    def __call__(self, index: int) -> dict:
        c = self.config
        sample = detection_sample(self.reader, self.columns, index, self.targets, c.image_size,
                                  val_crop_ratio=c.val_crop_ratio, to_pil=c.to_pil,
                                  decode=dict(fast_resize=c.fast_resize, reduced_decode=c.reduced_decode,
                                              region_decode=c.region_decode))
        if self.normalize is not None:
            sample["image"] = self.normalize(sample["image"][None])[0]
        return sample

    def transformed(self, sample: dict, dataset: Any) -> Any:
        if self.targets.layout == "torchvision":
            image, target = sample.pop("image"), sample
            target["labels"] = target["labels"] + 1
            return (image, target) if dataset.transform is None else dataset.transform(image, target)
        return sample if dataset.transform is None else dataset.transform(sample)
