"""Batched augmentation on the training device (RandAugment, MixUp/CutMix, resizing schedules, multi-crop views).

The loader hands uint8 batches to the device; the ops of this package run
there, batched, with per-sample parameters drawn on the host from a
generator each stage owns (see ``dataio.augment.seeding``).
"""

from dataio.augment import crop_boxes
from dataio.augment.chain import CropBoxes, DeviceAugment, EpochSizedCrop, Normalize, RandomResizedCrop
from dataio.augment.mix import MixConfig, MixUpCutMix, smooth_one_hot
from dataio.augment.progressive import ResolutionSchedule
from dataio.augment.randaugment import OPS, RandAugment, RandAugmentConfig
from dataio.augment.seeding import RandomStage, SeedKey
from dataio.augment.view_ops import ViewParams, ViewRecipe, apply_views, draw_view_params

__all__ = ["OPS", "CropBoxes", "DeviceAugment", "EpochSizedCrop", "MixConfig", "MixUpCutMix", "Normalize", "RandAugment",
           "RandAugmentConfig", "RandomResizedCrop", "RandomStage", "ResolutionSchedule", "SeedKey", "ViewParams",
           "ViewRecipe", "apply_views", "crop_boxes", "draw_view_params", "smooth_one_hot"]
