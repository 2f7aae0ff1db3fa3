"""Batched augmentation on the training device (RandAugment, MixUp/CutMix, resizing schedules).

The loader hands uint8 batches to the device; the ops of this package run
there, batched, with per-sample parameters drawn on the host from a
generator each stage owns (see ``augment.seeding``).
"""

from augment.chain import CropBoxes, DeviceAugment, Normalize, RandomResizedCrop
from augment.mix import MixConfig, MixUpCutMix, smooth_one_hot
from augment.progressive import ResolutionSchedule
from augment.randaugment import OPS, RandAugment, RandAugmentConfig
from augment.seeding import RandomStage, SeedKey

__all__ = ["OPS", "CropBoxes", "DeviceAugment", "MixConfig", "MixUpCutMix", "Normalize", "RandAugment",
           "RandAugmentConfig", "RandomResizedCrop", "RandomStage", "ResolutionSchedule", "SeedKey",
           "smooth_one_hot"]
