"""What ``ViewsLoader(folder, views=ViewsConfig(...))`` makes of each image: multi-crop views for self-supervised
training, as DINO, DINOv2 and iBOT train.

Each image is decoded once per epoch; from it come ``global_crops`` views of ``global_size`` pixels (a
RandomResizedCrop of ``global_scale`` of its area) and ``local_crops`` of ``local_size`` (``local_scale``), each
flipped with probability ``hflip`` and put through its own photometric ops (``augment.view_params.ViewRecipe``:
colour jitter, grayscale, Gaussian blur, solarize, with the recipe's probabilities per view): global view ``v`` takes
``global_recipes[v % len(global_recipes)]``, every local view ``local_recipe``. The defaults are DINOv2's
``DataAugmentationDINO`` (``ViewRecipe.dino_global_1``, ``dino_global_2``, ``dino_local``).

The batch (``dataio.views.view_finish``) holds the views as DINOv2's collate lays them out: ``collated_global_crops``
``(global_crops * N, 3, global_size, global_size)`` and ``collated_local_crops``, view-major (rows ``v * N`` to
``(v + 1) * N - 1`` are view ``v`` of every sample), and ``views``, the list of each view's ``(N, 3, S, S)`` (views of
those two tensors, no copy) in the order DINO's loss takes them: the global views, then the local ones. With
``masks`` (``augment.ibot_masks.IbotMasks``) the batch also holds iBOT's patch masks of the global views and what
DINOv2's loss reads beside them (``collated_masks``, ``mask_indices_list``, ``masks_weight``, ``upperbound``,
``n_masked_patches``), drawn from the batch's key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from dataio.augment.ibot_masks import IbotMasks
from dataio.augment.view_params import ViewRecipe
from dataio.formats.errors import ConfigError


# Bounds that keep a batch's views allocatable: DINO takes 2 global and 6-10 local views of 224 and 96 px.
MAX_GLOBAL, MAX_LOCAL, MAX_SIZE = 16, 64, 2048


def _dino_globals() -> tuple[ViewRecipe, ...]:
    return ViewRecipe.dino_global_1(), ViewRecipe.dino_global_2()


@dataclass(frozen=True, kw_only=True)
class ViewsConfig:
    """The views of each image: how many, their sizes and crops, and their photometric recipes."""

    global_crops: int = 2
    global_size: int = 224
    global_scale: tuple[float, float] = (0.32, 1.0)
    local_crops: int = 8
    local_size: int = 96
    local_scale: tuple[float, float] = (0.05, 0.32)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)  # the crops' aspect ratios, as RandomResizedCrop's
    hflip: float = 0.5  # each view's own flip
    global_recipes: tuple[ViewRecipe, ...] = field(default_factory=_dino_globals)
    local_recipe: ViewRecipe = field(default_factory=ViewRecipe.dino_local)
    masks: IbotMasks | None = None  # iBOT's patch masks of the global views, as DINOv2's collate makes them
    output: Literal["dict", "tuple"] | None = None  # batches as dicts, or DINO's (views, labels); None: the face's

    def __post_init__(self) -> None:
        for name in ("global_scale", "local_scale", "ratio", "global_recipes"):  # lists from argparse or OmegaConf
            value = getattr(self, name)
            if not isinstance(value, (str, bytes, dict)) and hasattr(value, "__len__") and hasattr(value, "__iter__"):
                object.__setattr__(self, name, tuple(value))
        for name, least, most in (("global_crops", 1, MAX_GLOBAL), ("local_crops", 0, MAX_LOCAL),
                                  ("global_size", 8, MAX_SIZE), ("local_size", 8, MAX_SIZE)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
                raise ConfigError(f"{{0}} must be an int in {least}..{most}, got {value!r:.20}", name)
        for name in ("global_scale", "local_scale"):
            lo, hi = _pair(getattr(self, name), name)
            if not 0 < lo <= hi <= 1:
                raise ConfigError(f"{{0}} must satisfy 0 < lo <= hi <= 1, got {getattr(self, name)!r:.40}", name)
        lo, hi = _pair(self.ratio, "ratio")
        if not 0 < lo <= hi:
            raise ConfigError(f"{{0}} must satisfy 0 < lo <= hi, got {self.ratio!r:.40}", "ratio")
        if isinstance(self.hflip, bool) or not isinstance(self.hflip, (int, float)) or not 0 <= self.hflip <= 1:
            raise ConfigError(f"{{0}} must be a probability, got {self.hflip!r:.20}", "hflip")
        recipes = self.global_recipes
        if (not isinstance(recipes, tuple) or not recipes
                or not all(isinstance(recipe, ViewRecipe) for recipe in recipes)):
            raise ConfigError("{0} must be a non-empty tuple of ViewRecipe", "global_recipes")
        if not isinstance(self.local_recipe, ViewRecipe):
            raise ConfigError(f"{{0}} must be a ViewRecipe, got {type(self.local_recipe).__name__}", "local_recipe")
        if len({(r.blur_kernel, r.solarize_threshold) for r in recipes}) > 1:  # one batch of draws per group
            raise ConfigError("{0} must share one blur_kernel and one solarize_threshold", "global_recipes")
        if self.output not in (None, "dict", "tuple"):
            raise ConfigError(f"{{0}} must be 'dict', 'tuple' or None, got {self.output!r:.20}", "output")
        for size, recipes, name in ((self.global_size, self.global_recipes, "global_size"),
                                    (self.local_size, (self.local_recipe,) if self.local_crops else (), "local_size")):
            wide = [r.blur_kernel for r in recipes if r.blur and r.blur_kernel // 2 >= size]
            if wide:  # the blur's reflect padding needs more than half its taps of image on each side
                raise ConfigError(f"{{0}} {size} is too small for a blur of {wide[0]} taps (each side must be larger "
                                  f"than {wide[0] // 2}): a larger view or a smaller blur_kernel", name)
        if self.masks is not None and not isinstance(self.masks, IbotMasks):
            raise ConfigError(f"{{0}} must be an IbotMasks or None, got {type(self.masks).__name__}", "masks")
        if self.masks is not None and self.masks.side(self.global_size) < 1:
            raise ConfigError(f"{{0}}.patch_size {self.masks.patch_size} is larger than global_size "
                              f"{self.global_size}", "masks")

    @property
    def views(self) -> int:
        """Views per image: the global ones, then the local ones."""
        return self.global_crops + self.local_crops

    def recipe(self, view: int) -> ViewRecipe:
        """The photometric recipe of view ``view`` (globals first)."""
        if view < self.global_crops:
            return self.global_recipes[view % len(self.global_recipes)]
        return self.local_recipe


def _pair(value: object, name: str) -> tuple[float, float]:
    if not (isinstance(value, tuple) and len(value) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)):
        raise ConfigError(f"{{0}} must be two finite numbers (lo, hi), got {value!r:.40}", name)
    return float(value[0]), float(value[1])
