"""The device side of a training batch: crop/flip, colour jitter, RandAugment, MixUp/CutMix, normalise, erase.

The order is timm's: jitter or RandAugment on the crop, mixing in the collate, then normalisation and
random erasing of the normalised batch (timm's ``PrefetchLoader``).

``DeviceAugment`` is what the loader runs on each uint8 batch after the copy
to the device (on the copy stream, so it overlaps the model's work). It is
also usable on its own: ``DeviceAugment(...).seed_for(key)`` then
``images, targets = chain(images, labels)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from dataio.augment.color_jitter import ColorJitter, ColorJitterConfig
from dataio.augment.crop_boxes import flips, random_resized_crop_boxes
from dataio.augment.geometry_ops import crop_resize_flip
from dataio.augment.mix import MixConfig, MixUpCutMix
from dataio.augment.progressive import ResolutionSchedule
from dataio.augment.random_erasing import ErasingConfig, RandomErasing
from dataio.augment.randaugment import RandAugment, RandAugmentConfig
from dataio.augment.seeding import RandomStage, SeedKey
from dataio.augment.timm_randaugment import TimmRandAugment
from dataio.augment.timm_strings import TimmRandAugmentConfig


class Normalize:
    """``(x - 255 * mean) / (255 * std)`` as float32, on the images' device."""

    def __init__(self, mean: tuple[float, float, float], std: tuple[float, float, float]) -> None:
        self.mean = torch.tensor([m * 255 for m in mean]).view(1, 3, 1, 1)
        self.std = torch.tensor([s * 255 for s in std]).view(1, 3, 1, 1)

    def __call__(self, images: torch.Tensor,
                 memory_format: torch.memory_format = torch.preserve_format) -> torch.Tensor:
        """The normalised batch in ``memory_format``. A uint8 batch changes layout in its float conversion's
        pass: NHWC uint8 to contiguous NCHW float32 there took 200 ms for 256 x 224 px on 2 cores, no more than
        staying channels_last (222-249 ms); a ``contiguous()`` after normalising took 390-452 ms."""
        if self.mean.device != images.device:
            self.mean, self.std = self.mean.to(images.device), self.std.to(images.device)
        if images.dtype == torch.uint8:
            return images.to(torch.float32, memory_format=memory_format).sub_(self.mean).div_(self.std)
        out = (images - self.mean).div_(self.std)
        return out if memory_format == torch.preserve_format else out.contiguous(memory_format=memory_format)


@dataclass(frozen=True, kw_only=True)
class CropBoxes:
    """Per-sample crops to apply on the device: (N, 4) x0, y0, x1, y1 in the batch's pixels, and flips."""

    boxes: np.ndarray
    flipped: np.ndarray


class RandomResizedCrop(RandomStage):
    """Device RandomResizedCrop + flip for batches of one size (torchvision's box algorithm).

    Boxes can also come from the loader (``crops=``), which draws them against
    each image's original size and maps them onto the fixed-size decode.
    """

    stream = 3

    def __init__(self, size: int, scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3 / 4, 4 / 3), hflip: float = 0.5) -> None:
        super().__init__()
        self.size, self.scale, self.ratio, self.hflip = size, scale, ratio, hflip

    def __call__(self, images: torch.Tensor, crops: CropBoxes | None = None) -> torch.Tensor:
        if crops is None:
            n, _, height, width = images.shape
            rng = self.numpy_rng()
            boxes = random_resized_crop_boxes(np.full(n, width), np.full(n, height), rng, self.scale, self.ratio)
            crops = CropBoxes(boxes=boxes, flipped=flips(n, rng, self.hflip))
        out = crop_resize_flip(images.float(), torch.from_numpy(crops.boxes), torch.from_numpy(crops.flipped), self.size)
        return out.clamp_(0, 255)


class EpochSizedCrop(RandomResizedCrop):
    """The device crop of a resolution schedule: output size from the batch's epoch (``seed_for``'s key)."""

    def __init__(self, size: int, *, schedule: ResolutionSchedule | None = None,
                 scale: tuple[float, float] = (0.08, 1.0), ratio: tuple[float, float] = (3 / 4, 4 / 3),
                 hflip: float = 0.5) -> None:
        super().__init__(size, scale, ratio, hflip)
        self.schedule = schedule

    def __call__(self, images: torch.Tensor, crops: CropBoxes | None = None) -> torch.Tensor:
        if self.schedule is not None:
            self.size = self.schedule.image_size(self.key.epoch)
        return super().__call__(images, crops)


class DeviceAugment:
    """Optional crop, colour jitter, RandAugment (dataio's or timm's) and MixUp/CutMix, then optional
    normalisation, random erasing (of the normalised batch) and layout."""

    def __init__(self, *, crop: RandomResizedCrop | None = None,
                 randaugment: RandAugmentConfig | TimmRandAugmentConfig | None = None, mix: MixConfig | None = None,
                 normalize: Normalize | None = None, channels_last: bool = True,
                 color_jitter: ColorJitterConfig | None = None, erasing: ErasingConfig | None = None) -> None:
        self.crop = crop
        self.color_jitter = ColorJitter(color_jitter) if color_jitter else None
        # Stages pass floats along; the chain rounds once at the end (or normalises).
        stage = TimmRandAugment if isinstance(randaugment, TimmRandAugmentConfig) else RandAugment
        self.randaugment = stage(dataclasses.replace(randaugment, output="float")) if randaugment else None
        self.mix = MixUpCutMix(mix) if mix else None
        self.erasing = RandomErasing(erasing) if erasing and erasing.probability > 0 else None
        self.normalize, self.channels_last = normalize, channels_last

    @property
    def stages(self) -> list[RandomStage]:
        return [s for s in (self.crop, self.color_jitter, self.randaugment, self.mix, self.erasing) if s is not None]

    def seed_for(self, key: SeedKey) -> None:
        """Re-seed every random stage for one batch."""
        for stage in self.stages:
            stage.seed_for(key)

    def __call__(self, images: torch.Tensor, labels: torch.Tensor | None,
                 crops: CropBoxes | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(N, 3, H, W) uint8 -> (images, labels or (N, K) soft targets); ``labels`` None for samples without
        (image-text pairs, views: their loaders refuse ``mix``)."""
        if self.crop is not None:
            images = self.crop(images, crops)
            if self.randaugment is not None and self.randaugment.uses_kernel(images.device, torch.uint8):
                images = images.round_().to(torch.uint8)  # on the CPU: the kernel's uint8 path (PIL rounds per op too)
        if self.color_jitter is not None:
            images = self.color_jitter(images)
        if self.randaugment is not None:
            # The kernel's values are whole numbers: with no mixing after, keep them uint8 (no 4-byte copy)
            whole = self.mix is None and self.randaugment.uses_kernel(images.device, images.dtype)
            images = self.randaugment(images, output="uint8" if whole else None)
        if self.mix is not None and labels is not None:
            images, labels = self.mix(images, labels)
        if self.normalize is not None:
            images = self.normalize(images)
            if self.erasing is not None:
                images = self.erasing(images)
        elif images.is_floating_point():
            images = images.round().clamp_(0, 255).to(torch.uint8)
        memory_format = torch.channels_last if self.channels_last else torch.contiguous_format
        return images.contiguous(memory_format=memory_format), labels
