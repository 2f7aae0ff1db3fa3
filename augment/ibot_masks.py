"""iBOT's patch masks for the global views, as DINOv2's collate makes them, drawn from a seeded generator.

DINOv2 (``dinov2/data/collate.py``, ``masking.py``) masks a share of the global crops' patch tokens for iBOT's
loss: ``probability`` of the ``B`` global crops of a batch get a mask of a ratio spread evenly over ``ratio``
(crop ``i`` of those draws its ratio in the ``i``-th of ``B * probability`` equal steps), made of random
rectangles of patches (BEiT's blockwise masking: area at least ``min_patches``, aspect ratio log-uniform in
``[min_aspect, 1 / min_aspect]``, at most half the patches each), the rest get none, and the crops are shuffled.
DINOv2 draws all of it from Python's global ``random``, so a resumed run masks other patches; here every draw
comes from the generator the loader seeds from the batch's key, so a resume masks the same ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dataio.formats.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class IbotMasks:
    """The masks of the global views' patch tokens (DINOv2's defaults: ViT patches of 14 px, ratio 0.1-0.5 on half
    of the global crops)."""

    patch_size: int = 14
    ratio: tuple[float, float] = (0.1, 0.5)
    probability: float = 0.5
    min_patches: int = 4
    min_aspect: float = 0.3

    def __post_init__(self) -> None:
        if not isinstance(self.ratio, (str, bytes)) and hasattr(self.ratio, "__len__"):
            object.__setattr__(self, "ratio", tuple(self.ratio))  # a list from argparse or OmegaConf
        if isinstance(self.patch_size, bool) or not isinstance(self.patch_size, int) or self.patch_size < 1:
            raise ConfigError(f"{{0}} must be an int >= 1, got {self.patch_size!r:.20}", "patch_size")
        lo, hi = self.ratio if isinstance(self.ratio, tuple) and len(self.ratio) == 2 else (-1.0, -1.0)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (lo, hi)) or not 0 <= lo <= hi <= 1:
            raise ConfigError(f"{{0}} must be a (lo, hi) tuple with 0 <= lo <= hi <= 1, got {self.ratio!r:.40}", "ratio")
        if isinstance(self.probability, bool) or not isinstance(self.probability, (int, float)) \
                or not 0 <= self.probability <= 1:
            raise ConfigError(f"{{0}} must be a probability, got {self.probability!r:.20}", "probability")
        if isinstance(self.min_patches, bool) or not isinstance(self.min_patches, int) or self.min_patches < 1:
            raise ConfigError(f"{{0}} must be an int >= 1, got {self.min_patches!r:.20}", "min_patches")
        if isinstance(self.min_aspect, bool) or not isinstance(self.min_aspect, (int, float)) \
                or not 0 < self.min_aspect <= 1:
            raise ConfigError(f"{{0}} must be in (0, 1], got {self.min_aspect!r:.20}", "min_aspect")

    def side(self, size: int) -> int:
        """Patches along a side of a ``size`` px global crop."""
        return size // self.patch_size


def _blocks(mask: np.ndarray, patches: int, most: int, config: IbotMasks, rng: np.random.Generator) -> None:
    """Mask ``patches`` patches of ``mask`` (side x side) in rectangles of at most ``most`` patches each."""
    height, width = mask.shape
    low, high = math.log(config.min_aspect), math.log(1 / config.min_aspect)
    count = 0
    while count < patches:
        budget = min(patches - count, most)
        delta = 0
        for _ in range(10):  # BEiT's tries per rectangle
            area = config.min_patches + (budget - config.min_patches) * rng.random()  # Python's uniform: b < a too
            aspect = math.exp(low + (high - low) * rng.random())
            h, w = int(round(math.sqrt(area * aspect))), int(round(math.sqrt(area / aspect)))
            if w < width and h < height:
                top, left = int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1))
                block = mask[top:top + h, left:left + w]
                if 0 < h * w - int(block.sum()) <= budget:
                    delta = h * w - int(block.sum())
                    block[...] = True
            if delta > 0:
                break
        if delta == 0:
            return
        count += delta


def ibot_masks(config: IbotMasks, crops: int, size: int, rng: np.random.Generator) -> dict[str, np.ndarray | int]:
    """The masks of a batch's ``crops`` global crops of ``size`` px, and what DINOv2's loss reads beside them:
    ``collated_masks`` (crops, tokens) bool, ``mask_indices_list`` (the masked tokens' flat indices),
    ``masks_weight`` (1 / each masked token's crop's count), ``upperbound`` and ``n_masked_patches`` (1,)."""
    side = config.side(size)
    tokens = side * side
    masked = int(crops * config.probability)
    steps = np.linspace(config.ratio[0], config.ratio[1], masked + 1)
    masks = np.zeros((crops, side, side), dtype=bool)
    upperbound = 0
    most = max(1, int(0.5 * tokens))  # DINOv2's max_num_patches: half the patches
    for i in range(masked):
        _blocks(masks[i], int(tokens * (steps[i] + (steps[i + 1] - steps[i]) * rng.random())), most, config, rng)
        upperbound += int(tokens * steps[i + 1])
    masks = masks[rng.permutation(crops)].reshape(crops, tokens)
    indices = np.flatnonzero(masks)
    weights = np.broadcast_to((1 / np.maximum(masks.sum(axis=1), 1))[:, None], masks.shape)[masks].astype(np.float32)
    return {"collated_masks": masks, "mask_indices_list": indices.astype(np.int64), "masks_weight": weights,
            "upperbound": upperbound, "n_masked_patches": np.array([len(indices)], dtype=np.int64)}
