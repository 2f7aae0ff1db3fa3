"""Batched augmentation on the training device (RandAugment, MixUp/CutMix, timm's RandAugment strings,
random erasing and colour jitter, resizing schedules, multi-crop views).

The loader hands uint8 batches to the device; the ops of this package run
there, batched, with per-sample parameters drawn on the host from a
generator each stage owns (see ``dataio.augment.seeding``).
"""

from dataio.augment import crop_boxes
from dataio.augment.color_jitter import ColorJitter, ColorJitterConfig
from dataio.augment.chain import CropBoxes, DeviceAugment, EpochSizedCrop, Normalize, RandomResizedCrop
from dataio.augment.mix import MixConfig, MixUpCutMix, smooth_one_hot
from dataio.augment.progressive import ResolutionSchedule
from dataio.augment.random_erasing import ErasingConfig, RandomErasing
from dataio.augment.randaugment import OPS, RandAugment, RandAugmentConfig
from dataio.augment.seeding import RandomStage, SeedKey
from dataio.augment.timm_randaugment import TimmRandAugment
from dataio.augment.timm_strings import TimmRandAugmentConfig
from dataio.augment.view_ops import ViewParams, ViewRecipe, apply_views, draw_view_params

__all__ = ["OPS", "ColorJitter", "ColorJitterConfig", "CropBoxes", "DeviceAugment", "EpochSizedCrop", "ErasingConfig",
           "MixConfig", "MixUpCutMix", "Normalize", "RandAugment", "RandAugmentConfig", "RandomErasing",
           "RandomResizedCrop", "RandomStage", "ResolutionSchedule", "SeedKey", "TimmRandAugment",
           "TimmRandAugmentConfig", "ViewParams", "ViewRecipe", "apply_views", "crop_boxes", "draw_view_params",
           "smooth_one_hot"]
