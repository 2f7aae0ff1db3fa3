"""MixUp (Zhang et al. 2018) and CutMix (Yun et al. 2019) with per-sample lambdas.

Sample ``i`` of the first half is mixed with sample ``i + N // 2`` and back
(the batch is already shuffled, and halves need no partner copy; timm flips). In ``"sample"`` mode every sample draws its own lambda and its own
choice of MixUp or CutMix; ``"batch"`` mode draws one of each for the batch.
CutMix boxes are clipped to the image and lambda is corrected to the area
actually pasted. Targets are soft, shape (N, num_classes), label-smoothed,
and sum to one. All parameters are drawn on the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from dataio.augment.seeding import RandomStage
from dataio.formats.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class MixConfig:
    """MixUp/CutMix settings; an alpha of 0 disables that method."""

    num_classes: int
    mixup_alpha: float = 0.8
    cutmix_alpha: float = 1.0
    prob: float = 1.0  # probability that a sample (or the batch) is mixed at all
    switch_prob: float = 0.5  # probability of CutMix when both are enabled
    mode: Literal["sample", "batch"] = "sample"
    label_smoothing: float = 0.1

    def __post_init__(self) -> None:
        if self.num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {self.num_classes}")
        if self.mixup_alpha < 0 or self.cutmix_alpha < 0 or self.mixup_alpha == self.cutmix_alpha == 0:
            raise ValueError("alphas must be >= 0 and at least one > 0")
        for name in ("prob", "switch_prob"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be a probability, got {getattr(self, name)}")
        if not 0 <= self.label_smoothing < 1:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.mode not in ("sample", "batch"):
            raise ValueError(f"mode must be 'sample' or 'batch', got {self.mode!r}")


def refuse_with_box_targets(mix: MixConfig | None) -> None:
    """Raise ConfigError if MixUp/CutMix is asked for on samples with box or mask targets.

    Blending two images leaves no one right set of boxes (and a CutMix patch hides parts of
    objects that no box rule accounts for), so the loader refuses the pairing rather than
    pick a rule silently."""
    if mix is not None:
        raise ConfigError("{0} (MixUp/CutMix) cannot be used with box or mask targets: it blends two images and "
                          "has no rule for their boxes; leave it unset", "mix")


def smooth_one_hot(labels: torch.Tensor, num_classes: int, smoothing: float) -> torch.Tensor:
    """(N, num_classes) float targets: ``1 - smoothing + smoothing / K`` on the label, ``smoothing / K`` elsewhere."""
    off = smoothing / num_classes
    targets = torch.full((len(labels), num_classes), off, device=labels.device)
    return targets.scatter_(1, labels.view(-1, 1), 1 - smoothing + off)


@dataclass(frozen=True)
class MixParams:
    """Host parameters of one call, all (N,): lambda (corrected), CutMix flag, box (y0, y1, x0, x1)."""

    lam: np.ndarray
    cutmix: np.ndarray
    box: np.ndarray  # (N, 4) int64; empty boxes for non-CutMix samples


def cutmix_boxes(lam: np.ndarray, height: int, width: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Boxes of area ``1 - lam`` centred uniformly, clipped; returns (boxes (N, 4), pasted fraction (N,))."""
    ratio = np.sqrt(1 - lam)
    cut_h, cut_w = (height * ratio).astype(np.int64), (width * ratio).astype(np.int64)
    cy, cx = rng.integers(0, height, len(lam)), rng.integers(0, width, len(lam))
    y0, y1 = np.clip(cy - cut_h // 2, 0, height), np.clip(cy + cut_h // 2, 0, height)
    x0, x1 = np.clip(cx - cut_w // 2, 0, width), np.clip(cx + cut_w // 2, 0, width)
    pasted = (y1 - y0) * (x1 - x0) / (height * width)
    return np.stack([y0, y1, x0, x1], axis=1), pasted


class MixUpCutMix(RandomStage):
    """``images, targets = MixUpCutMix(MixConfig(num_classes=K))(images, labels)``."""

    stream = 2

    def __init__(self, config: MixConfig) -> None:
        super().__init__()
        self.config = config

    def draw(self, n: int, height: int, width: int) -> MixParams:
        """Per-sample (or per-batch, repeated) lambdas, methods and boxes."""
        c, rng = self.config, self.numpy_rng()
        draws = n if c.mode == "sample" else 1
        if c.mixup_alpha > 0 and c.cutmix_alpha > 0:
            cutmix = rng.random(draws) < c.switch_prob
        else:
            cutmix = np.full(draws, c.cutmix_alpha > 0)
        alpha_mix, alpha_cut = max(c.mixup_alpha, 1e-6), max(c.cutmix_alpha, 1e-6)
        lam = np.where(cutmix, rng.beta(alpha_cut, alpha_cut, draws), rng.beta(alpha_mix, alpha_mix, draws))
        mixed = rng.random(draws) < c.prob
        lam, cutmix = np.where(mixed, lam, 1.0), cutmix & mixed
        if draws == 1:
            lam, cutmix = np.repeat(lam, n), np.repeat(cutmix, n)
        boxes, pasted = cutmix_boxes(lam, height, width, rng)
        if c.mode == "batch":
            boxes, pasted = np.repeat(boxes[:1], n, axis=0), np.repeat(pasted[:1], n)
        boxes[~cutmix] = 0
        lam = np.where(cutmix, 1 - pasted, lam)
        return MixParams(lam=lam.astype(np.float32), cutmix=cutmix, box=boxes)

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mix (N, 3, H, W) images and int64 labels into (images of the input dtype, (N, K) float targets)."""
        n, _, height, width = images.shape
        p = self.draw(n, height, width)
        device = images.device
        # Per-pixel weight of the sample itself: 0 inside its CutMix box, its MixUp lambda
        # elsewhere (1 for CutMix and unmixed samples). One lerp then does both methods.
        lam_mix = torch.from_numpy(np.where(p.cutmix, 1.0, p.lam).astype(np.float32)).to(device).view(-1, 1, 1, 1)
        weight = lam_mix
        if p.cutmix.any():
            box = torch.from_numpy(p.box).to(device, non_blocking=True)
            rows = torch.arange(height, device=device).view(1, 1, height, 1)
            cols = torch.arange(width, device=device).view(1, 1, 1, width)
            y0, y1, x0, x1 = (box[:, i].view(-1, 1, 1, 1) for i in range(4))
            inside = (rows >= y0) & (rows < y1) & (cols >= x0) & (cols < x1)
            weight = lam_mix * (~inside)
        source = images.float()
        out = torch.empty_like(source)
        half = n // 2
        first, second = slice(0, half), slice(half, 2 * half)
        for mine, theirs in ((first, second), (second, first)):
            torch.lerp(source[theirs], source[mine], weight[mine], out=out[mine])  # theirs + w * (mine - theirs)
        out[2 * half:] = source[2 * half:]  # odd batch: the last sample is its own partner
        if not images.is_floating_point():
            out = out.round_().to(images.dtype)
        lam = torch.from_numpy(p.lam).to(device).view(-1, 1)
        one_hot = smooth_one_hot(labels, self.config.num_classes, self.config.label_smoothing)
        return out, one_hot * lam + one_hot[partners(n).to(device)] * (1 - lam)


def partners(n: int) -> torch.Tensor:
    """(n,) index of each sample's partner: the two halves pair up; an odd last sample pairs with itself."""
    half = n // 2
    index = torch.arange(n)
    index[:half] += half
    index[half:2 * half] -= half
    return index
