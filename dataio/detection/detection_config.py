"""What the image loader does with box and mask targets (``ImageLoader(..., targets=DetectionConfig(...))``).

A folder whose manifest declares boxes (``dataio convert coco``) is read with
targets by default (``DetectionConfig()``); these options say which crop a
training batch takes, which boxes survive it, and whether masks come along.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from dataio.augment.bbox_crop import BBoxCropConfig
from dataio.formats.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class DetectionConfig:
    """Box and mask targets through the loader's crops, flips, resizes and RandAugment's warps.

    ``crop`` (training): ``"bbox"``, SSD's crop constrained by box overlap
    (``bbox_crop``: DALI's ``random_bbox_crop``), ``"random_resized"``, the
    loader's RandomResizedCrop (``crop_scale``, ``crop_ratio``), or ``"flip"``,
    Faster R-CNN's recipe: no crop, the whole image resized keeping its ratio
    (letterboxed: ``augment.letterbox``); all with the loader's ``hflip``.
    ``eval_crop`` (evaluation): ``"whole"``, the whole image resized to the
    square output (SSD's evaluation: no object cut off), ``"letterbox"``, the
    whole image keeping its ratio (the longer side the output's, centred, zeros
    around), or ``"centre"``, the classification view (``val_crop_ratio``).
    Evaluation batches carry each image's ``orig_size`` and the ``scale`` and
    ``offset`` that took it to the output (``detection.map_back.to_original``).
    ``pixels``: without ``normalize``, ``"float"`` gives float32 images in [0, 1]
    (what torchvision's detection models take: they normalise themselves), and
    ``"uint8"`` the decoded bytes; the loader's ``normalize=True`` (for models
    that do not normalise) gives ImageNet-normalised floats instead. ``layout``:
    ``"dict"`` (one dict of padded tensors) or ``"torchvision"``: ``(images,
    targets)``, a list of (3, S, S) images and a list of target dicts, as
    torchvision's detection models take them (``detection.torchvision_layout``). A box is kept when
    at least ``min_visible`` of its area (through every map, without clipping)
    is left in the output and both its sides are longer than ``min_side``
    pixels; ``crowd=False`` drops COCO's crowd boxes (``iscrowd``). ``masks``
    adds each kept box's mask at the output size; ``max_boxes`` pads every batch
    to that many boxes instead of to its busiest sample's count (a sample with
    more, counted before RandAugment, is its ``SampleError`` under ``on_error``:
    dropped and counted with ``skip``).
    """

    masks: bool = False
    crop: Literal["bbox", "random_resized", "flip"] = "bbox"
    eval_crop: Literal["whole", "centre", "letterbox"] = "whole"
    pixels: Literal["float", "uint8"] = "float"
    layout: Literal["dict", "torchvision"] = "dict"
    bbox_crop: BBoxCropConfig = field(default_factory=BBoxCropConfig)
    min_visible: float = 0.25
    min_side: float = 1.0
    crowd: bool = True
    max_boxes: int | None = None
    # with masks: a source in which an object has no segmentation (box-only annotations merged in) is refused when
    # the loader is built, naming how many; its mask is all zeros, which a mask task would train as background
    require_masks: bool = False

    def __post_init__(self) -> None:
        for name, allowed in (("crop", ("bbox", "random_resized", "flip")),
                              ("eval_crop", ("whole", "centre", "letterbox")), ("pixels", ("float", "uint8")),
                              ("layout", ("dict", "torchvision"))):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{{0}} must be one of {', '.join(map(repr, allowed))}, got "
                                  f"{getattr(self, name)!r:.40}", name)
        if not isinstance(self.bbox_crop, BBoxCropConfig):
            raise ConfigError(f"{{0}} must be a BBoxCropConfig, got {type(self.bbox_crop).__name__}", "bbox_crop")
        for name in ("masks", "crowd", "require_masks"):  # a truthy "no" from a config file would have asked for masks
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{{0}} must be True or False, got {getattr(self, name)!r:.20}", name)
        if isinstance(self.min_visible, bool) or isinstance(self.min_side, bool):
            raise ConfigError("{0} must be a number, not a bool", "min_visible" if isinstance(self.min_visible, bool)
                              else "min_side")
        if not (isinstance(self.min_visible, (int, float)) and 0 <= self.min_visible <= 1):
            raise ConfigError(f"{{0}} must be in [0, 1], got {self.min_visible!r}", "min_visible")
        if not (isinstance(self.min_side, (int, float)) and math.isfinite(self.min_side) and self.min_side >= 0):
            raise ConfigError(f"{{0}} must be a number of pixels >= 0, got {self.min_side!r}", "min_side")
        if self.max_boxes is not None and (isinstance(self.max_boxes, bool) or not isinstance(self.max_boxes, int)
                                           or self.max_boxes < 1):
            raise ConfigError(f"{{0}} must be None or an int >= 1, got {self.max_boxes!r}", "max_boxes")
