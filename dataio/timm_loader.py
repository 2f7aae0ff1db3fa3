"""timm's ``create_dataset`` and ``create_loader`` over dataio shard folders: timm's ``train.py`` with one import.

``from dataio.timm_loader import create_dataset, create_loader`` after timm's own import makes timm's training
script read ``--data-dir`` as dataio folders (``train``/``validation`` or timm's synonyms, as timm's
``_search_split`` finds them) through ``dataio.ImageLoader``, with timm's arguments: the crop (``scale``,
``ratio``, ``hflip``), ``auto_augment`` (timm's RandAugment strings, ``dataio.augment.timm_strings``),
``color_jitter`` (disabled under RandAugment, as timm does), random erasing (``re_prob``, ``re_mode``,
``re_count``), ``mean``/``std``, eval ``crop_pct``, and the mixup of timm's ``FastCollateMixup`` collate (or a
``mixup_args=`` dict) as ``MixConfig.from_timm``. A split without its folder reads ``--data-dir`` itself, as
timm's ``_search_split`` does, said in one line on the ``dataio`` logger; ``crop_pct=0``, which timm reads as its
default 0.875, is refused (a share in (0, 1] or None). The batches come as timm's ``PrefetchLoader`` gives them:
normalised float on ``device``, soft targets when mixing. An argument dataio cannot honour (vflip, grayscale,
blur, AugMix splits, repeated augmentation, other crop modes or collates) is refused in one line naming it;
dataio resizes bilinear (antialiased) whatever ``interpolation`` says. The loaders' settings go to the
``dataio`` logger at info level, so a run's log shows what timm's flags became.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from numbers import Real
from pathlib import Path
from typing import Any

import torch

from dataio.augment.mix import MixConfig
from dataio.augment.timm_strings import TimmRandAugmentConfig
from dataio.formats.errors import ConfigError
from dataio.formats.fallback_log import warn_once
from dataio.images.loader import ImageLoader
from dataio.images.shard_dataset import ShardDataset

log = logging.getLogger("dataio")
SYNONYMS = {"train": ("train", "training"), "validation": ("val", "valid", "validation", "eval", "evaluation")}
MIXUP_ATTRIBUTES = {"mixup_alpha": "mixup_alpha", "cutmix_alpha": "cutmix_alpha", "cutmix_minmax": "cutmix_minmax",
                    "prob": "mix_prob", "switch_prob": "switch_prob", "mode": "mode", "correct_lam": "correct_lam",
                    "label_smoothing": "label_smoothing", "num_classes": "num_classes"}  # timm's Mixup attributes


def split_folder(root: str | Path, split: str) -> Path:
    """timm's ``_search_split``: ``root/split``, else a synonym's folder, else ``root``."""
    root = Path(root)
    name = split.split("[")[0]
    if (root / name).exists():
        return root / name
    for synonyms in SYNONYMS.values():
        if name in synonyms:
            return next((root / s for s in synonyms if (root / s).exists()), root)
    return root


def create_dataset(name: str, root: str | None = None, split: str = "validation", search_split: bool = True,
                   class_map: Any = None, num_samples: int | None = None, input_img_mode: str = "RGB",
                   **_timm_only: Any) -> ShardDataset:
    """The dataio folder of ``split`` under ``root`` as a ``ShardDataset`` (timm's folder dataset's place)."""
    if name and name.lower() not in ("folder", "imagefolder"):
        raise ConfigError(f"{{0}} {name!r}: dataio reads shard folders (--dataset '' and --data-dir FOLDER)",
                          "dataset")
    if class_map or num_samples or input_img_mode != "RGB":
        raise ConfigError("{0}: class_map, num_samples and a non-RGB input_img_mode are not read from dataio "
                          "folders (convert the subset you want)", "dataset")
    if root is None:
        raise ConfigError("{0} is needed: the dataio folder holding the splits", "root")
    folder = split_folder(root, split) if search_split else Path(root)
    if search_split and folder == Path(root):  # timm's fallback, said: train and validation may read one folder
        name = split.split("[")[0]
        looked = next((synonyms for synonyms in SYNONYMS.values() if name in synonyms), (name,))
        warn_once(f"timm-split-{name}-{root}", f"timm_loader: no split folder {' or '.join(looked)} under "
                  f"{root}: split {split!r} reads {root} itself, as timm's _search_split does (a train and a "
                  "validation split that both fall back read the same images)")
    return ShardDataset(folder)


def mixup_of(collate_fn: Any, mixup_args: Mapping[str, Any] | None) -> MixConfig | None:
    """``MixConfig.from_timm`` of ``mixup_args``, or of timm's ``FastCollateMixup`` given as the collate."""
    if mixup_args:
        return MixConfig.from_timm(mixup_args)
    if collate_fn is None:
        return None
    if not all(hasattr(collate_fn, attribute) for attribute in MIXUP_ATTRIBUTES.values()):
        raise ConfigError(f"{{0}} {type(collate_fn).__name__}: dataio collates its own batches; only timm's "
                          "FastCollateMixup (read as MixConfig.from_timm) is taken", "collate_fn")
    return MixConfig.from_timm({key: getattr(collate_fn, attribute) for key, attribute in MIXUP_ATTRIBUTES.items()})


def _refuse_unsupported(given: Mapping[str, Any]) -> None:
    """One line for the first timm argument dataio does not do."""
    unsupported = {"no_aug": False, "re_split": False, "vflip": 0.0, "grayscale_prob": 0.0, "gaussian_blur_prob": 0.0,
                   "num_aug_repeats": 0, "num_aug_splits": 0, "crop_border_pixels": None, "tf_preprocessing": False}
    for name, default in unsupported.items():
        if given.get(name, default) not in (default, None):
            raise ConfigError(f"{{0}}={given[name]!r} is not done by dataio's loader (leave timm's default)", name)
    if given.get("train_crop_mode") not in (None, "rrc"):
        raise ConfigError("{0}: dataio's training crop is RandomResizedCrop ('rrc')", "train_crop_mode")
    if given.get("crop_mode") not in (None, "center"):
        raise ConfigError("{0}: dataio's eval view is resize and centre crop ('center')", "crop_mode")
    if given.get("img_dtype", torch.float32) != torch.float32 or given.get("fp16"):
        raise ConfigError("{0}: dataio's loader gives float32 (cast in the model's autocast)", "img_dtype")


def create_loader(dataset: ShardDataset, input_size: int | tuple[int, ...], batch_size: int, is_training: bool = False,
                  *, re_prob: float = 0.0, re_mode: str = "const", re_count: int = 1,
                  scale: tuple[float, float] | None = None, ratio: tuple[float, float] | None = None,
                  hflip: float = 0.5, color_jitter: float | tuple[float, ...] | None = 0.4,
                  color_jitter_prob: float | None = None, auto_augment: str | None = None,
                  mean: tuple[float, ...] = (0.485, 0.456, 0.406), std: tuple[float, ...] = (0.229, 0.224, 0.225),
                  crop_pct: float | None = None, collate_fn: Any = None, pin_memory: bool = False,
                  device: torch.device | str = "cuda", mixup_args: Mapping[str, Any] | None = None,
                  **timm_options: Any) -> ImageLoader:
    """``dataio.ImageLoader`` over ``dataset``'s folder with timm's ``create_loader`` arguments (names as timm's;
    ``mixup_args``: timm's Mixup dict, instead of a FastCollateMixup collate)."""
    _refuse_unsupported(timm_options)
    sides = (input_size,) if isinstance(input_size, int) else tuple(input_size)[-2:]
    if len(set(sides)) != 1:
        raise ConfigError(f"{{0}} {input_size}: dataio's crops are square", "input_size")
    if not isinstance(dataset, ShardDataset):
        raise ConfigError(f"{{0}} is a {type(dataset).__name__}: give dataio.timm_loader.create_dataset's", "dataset")
    options: dict[str, Any] = dict(batch_size=batch_size, image_size=int(sides[0]), train=is_training,
                                   shuffle=is_training, normalize=True, mean=tuple(mean), std=tuple(std),
                                   device=str(device), pin_memory=pin_memory, channels_last=False)
    if is_training:
        jitter_off = bool(auto_augment) and "3a" not in auto_augment  # timm: RandAugment turns the jitter off
        fill = tuple(float(min(255, round(255 * m))) for m in mean)  # timm's img_mean for the warps' border
        options.update(crop_scale=tuple(scale or (0.08, 1.0)), crop_ratio=tuple(ratio or (3 / 4, 4 / 3)), hflip=hflip,
                       randaugment=TimmRandAugmentConfig.from_timm(auto_augment, fill=fill) if auto_augment else None,
                       color_jitter=None if jitter_off else color_jitter, color_jitter_prob=color_jitter_prob,
                       re_prob=re_prob, re_mode=re_mode, re_count=re_count, mix=mixup_of(collate_fn, mixup_args),
                       drop_last=True)  # timm's training loader drops the last short batch
    else:
        if collate_fn is not None or mixup_args:
            raise ConfigError("{0} mixes training batches; an eval loader takes none", "collate_fn")
        if crop_pct is not None and (isinstance(crop_pct, bool) or not isinstance(crop_pct, Real)
                                     or not 0 < crop_pct <= 1):
            raise ConfigError(f"{{0}}={crop_pct!r:.40} is not a share in (0, 1] of the resized image (timm reads 0 "
                              "as its default 0.875: pass None for that)", "crop_pct")
        options.update(val_crop_ratio=0.875 if crop_pct is None else float(crop_pct))  # timm's DEFAULT_CROP_PCT
    loader = ImageLoader(dataset.source, **options)
    c = loader.config
    log.info("dataio.timm_loader: %s loader of %s: image_size=%d randaugment=%s mix=%s color_jitter=%s erasing=%s",
             "train" if is_training else "eval", dataset.source, c.image_size, c.randaugment, c.mix, c.jitter,
             c.erasing)
    return loader
