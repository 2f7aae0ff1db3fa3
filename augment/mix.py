"""MixUp (Zhang et al. 2018) and CutMix (Yun et al. 2019) with per-sample lambdas.

Sample ``i`` of the first half is mixed with sample ``i + N // 2`` and back
(``pairing="halves"``: the batch is already shuffled); ``pairing="flip"`` mixes
``i`` with ``N - 1 - i``, as timm's ``Mixup`` does. In ``"sample"`` mode every
sample draws its own lambda and its own choice of MixUp or CutMix (timm's
``"elem"``); ``"pair"`` draws once per pair of partners (timm's ``"pair"``);
``"batch"`` draws one of each for the batch. CutMix boxes are clipped to the
image and lambda is corrected to the area actually pasted (``correct_lam``);
``cutmix_minmax`` draws the box's sides instead, as timm's ``rand_bbox_minmax``.
Targets are soft, shape (N, num_classes), label-smoothed as timm's
``mixup_target``, and sum to one. All parameters are drawn on the host.
``MixConfig.from_timm(mixup_args)`` takes timm's own ``Mixup`` keywords.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, Literal

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
    mode: Literal["sample", "pair", "batch"] = "sample"
    label_smoothing: float = 0.1
    pairing: Literal["halves", "flip"] = "halves"  # partner of i: i +- N // 2, or N - 1 - i (timm)
    cutmix_minmax: tuple[float, float] | None = None  # CutMix box sides as shares of the image's (timm)
    correct_lam: bool = True  # lambda = 1 - the box's area after clipping (always with cutmix_minmax)

    @classmethod
    def from_timm(cls, mixup_args: Mapping[str, Any]) -> "MixConfig":
        """The config of ``timm.data.Mixup(**mixup_args)``: timm's keywords and defaults, timm's pairing (flip);
        timm's ``"elem"`` mode is ``"sample"`` here. A keyword timm's Mixup does not take is refused, and so is a
        value of the wrong type or shape (one line naming it, before any batch)."""
        unknown = sorted(set(mixup_args) - set(TIMM_MIXUP_DEFAULTS))
        if unknown:
            raise ConfigError(f"{{0}} has {unknown[0]!r}, which timm's Mixup does not take "
                              f"(it takes {', '.join(TIMM_MIXUP_DEFAULTS)})", "mixup_args")
        args = {**TIMM_MIXUP_DEFAULTS, **mixup_args}
        modes = {"elem": "sample", "pair": "pair", "batch": "batch"}
        if not isinstance(args["mode"], str) or args["mode"] not in modes:
            raise ConfigError(f"{{0}} mode {args['mode']!r:.60} is not one of timm's: elem, pair, batch", "mixup_args")
        minmax = args["cutmix_minmax"]
        if minmax is not None and not _pair(minmax):
            raise ConfigError(f"{{0}} is None or a (min, max) pair of shares, got {minmax!r:.60}", "cutmix_minmax")
        numbers = {name: _number(args[name], name) for name in ("mixup_alpha", "cutmix_alpha", "prob", "switch_prob",
                                                               "label_smoothing")}
        return cls(num_classes=args["num_classes"], mixup_alpha=numbers["mixup_alpha"],
                   cutmix_alpha=1.0 if minmax is not None else numbers["cutmix_alpha"],  # as timm forces it
                   cutmix_minmax=None if minmax is None else (_number(minmax[0], "cutmix_minmax"),
                                                              _number(minmax[1], "cutmix_minmax")),
                   prob=numbers["prob"], switch_prob=numbers["switch_prob"], mode=modes[args["mode"]],
                   correct_lam=bool(args["correct_lam"]), label_smoothing=numbers["label_smoothing"],
                   pairing="flip")

    def __post_init__(self) -> None:
        if self.cutmix_minmax is not None:
            if not _pair(self.cutmix_minmax):
                raise ConfigError(f"{{0}} is a (min, max) pair of shares, got {self.cutmix_minmax!r:.60}",
                                  "cutmix_minmax")
            lo, hi = (_number(share, "cutmix_minmax") for share in self.cutmix_minmax)
            if not 0 < lo < hi <= 1:
                raise ConfigError(f"{{0}} must be (min, max) shares with 0 < min < max <= 1, got "
                                  f"{self.cutmix_minmax}", "cutmix_minmax")
            if self.cutmix_alpha == 0:
                raise ConfigError("{0} draws CutMix boxes: cutmix_alpha must be > 0 (timm sets 1.0)", "cutmix_minmax")
        if self.pairing not in ("halves", "flip"):
            raise ConfigError(f"{{0}} must be 'halves' or 'flip', got {self.pairing!r}", "pairing")
        if isinstance(self.num_classes, bool) or not isinstance(self.num_classes, Integral):
            raise ConfigError(f"{{0}} must be an int, got {self.num_classes!r:.40}", "num_classes")
        if self.num_classes < 2:
            raise ValueError(f"num_classes must be >= 2, got {self.num_classes}")
        for name in ("mixup_alpha", "cutmix_alpha", "prob", "switch_prob", "label_smoothing"):
            _number(getattr(self, name), name)  # NaN passes every comparison below; inf draws NaN lambdas
        if self.mixup_alpha < 0 or self.cutmix_alpha < 0 or self.mixup_alpha == self.cutmix_alpha == 0:
            raise ValueError(f"mixup_alpha and cutmix_alpha must be >= 0 and one > 0, got {self.mixup_alpha} and "
                             f"{self.cutmix_alpha}")
        for name in ("prob", "switch_prob"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be a probability, got {getattr(self, name)}")
        if not 0 <= self.label_smoothing < 1:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.mode not in ("sample", "pair", "batch"):
            raise ValueError(f"mode must be 'sample', 'pair' or 'batch', got {self.mode!r}")

    def refuse_below_one_pixel(self, height: int, width: int) -> None:
        """One line when ``cutmix_minmax`` leaves no box side to draw at this image size: timm's
        ``rand_bbox_minmax`` draws sides in [int(S * min), int(S * max)), empty when both round to one number
        (numpy's ``high <= 0`` from the first batch otherwise, as timm's own)."""
        if self.cutmix_minmax is None:
            return
        lo, hi = self.cutmix_minmax
        for side in (height, width):
            if int(side * hi) <= int(side * lo):
                raise ConfigError(f"{{0}} {self.cutmix_minmax} draws box sides in [{int(side * lo)}, {int(side * hi)}) "
                                  f"px of a {side} px image_size: none to draw; give larger shares or a larger "
                                  "image_size", "cutmix_minmax")


def _pair(value: Any) -> bool:
    """Whether ``value`` is a sequence of two items (timm's argparse gives a list; a string is not one)."""
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and len(value) == 2


def _number(value: Any, name: str) -> float:
    """``value`` as a finite float, or one line naming ``name`` (NaN passes ``< 0`` checks silently; a string or
    a bool is not a strength)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ConfigError(f"{{0}} must be a finite number, got {value!r:.40}", name)
    return float(value)


# timm.data.Mixup's keywords and their defaults (timm/data/mixup.py, timm 1.0)
TIMM_MIXUP_DEFAULTS: dict[str, Any] = dict(mixup_alpha=1.0, cutmix_alpha=0.0, cutmix_minmax=None, prob=1.0,
                                           switch_prob=0.5, mode="batch", correct_lam=True, label_smoothing=0.1,
                                           num_classes=1000)


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
    """Boxes of area ``1 - lam`` centred uniformly, clipped (timm's ``rand_bbox``, the same draws in the same
    order); returns (boxes (N, 4) y0, y1, x0, x1, pasted fraction (N,))."""
    ratio = np.sqrt(1 - lam)
    cut_h, cut_w = (height * ratio).astype(np.int64), (width * ratio).astype(np.int64)
    cy, cx = rng.integers(0, height, len(lam)), rng.integers(0, width, len(lam))
    y0, y1 = np.clip(cy - cut_h // 2, 0, height), np.clip(cy + cut_h // 2, 0, height)
    x0, x1 = np.clip(cx - cut_w // 2, 0, width), np.clip(cx + cut_w // 2, 0, width)
    pasted = (y1 - y0) * (x1 - x0) / (height * width)
    return np.stack([y0, y1, x0, x1], axis=1), pasted


def minmax_boxes(n: int, minmax: tuple[float, float], height: int, width: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """timm's ``rand_bbox_minmax``: sides drawn in [min, max) of the image's, placed inside it; as above."""
    cut_h = rng.integers(int(height * minmax[0]), int(height * minmax[1]), n)
    cut_w = rng.integers(int(width * minmax[0]), int(width * minmax[1]), n)
    y0, x0 = rng.integers(0, height - cut_h, n), rng.integers(0, width - cut_w, n)
    return np.stack([y0, y0 + cut_h, x0, x0 + cut_w], axis=1), cut_h * cut_w / (height * width)


class MixUpCutMix(RandomStage):
    """``images, targets = MixUpCutMix(MixConfig(num_classes=K))(images, labels)``."""

    stream = 2

    def __init__(self, config: MixConfig) -> None:
        super().__init__()
        self.config = config

    def draw(self, n: int, height: int, width: int) -> MixParams:
        """Per-sample (per-pair or per-batch, repeated) lambdas, methods and boxes."""
        c, rng = self.config, self.numpy_rng()
        draws = {"sample": n, "pair": n // 2, "batch": 1}[c.mode]
        if c.mixup_alpha > 0 and c.cutmix_alpha > 0:
            cutmix = rng.random(draws) < c.switch_prob
        else:
            cutmix = np.full(draws, c.cutmix_alpha > 0)
        alpha_mix, alpha_cut = max(c.mixup_alpha, 1e-6), max(c.cutmix_alpha, 1e-6)
        lam = np.where(cutmix, rng.beta(alpha_cut, alpha_cut, draws), rng.beta(alpha_mix, alpha_mix, draws))
        mixed = rng.random(draws) < c.prob
        lam, cutmix = np.where(mixed, lam, 1.0), cutmix & mixed
        if c.cutmix_minmax is not None:
            boxes, pasted = minmax_boxes(draws, c.cutmix_minmax, height, width, rng)
        else:
            boxes, pasted = cutmix_boxes(lam, height, width, rng)
        boxes[~cutmix] = 0
        if c.correct_lam or c.cutmix_minmax is not None:
            lam = np.where(cutmix, 1 - pasted, lam)
        lam, cutmix, boxes = (spread(v, n, c.mode, c.pairing) for v in (lam, cutmix, boxes))
        return MixParams(lam=lam.astype(np.float32), cutmix=cutmix, box=boxes)

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mix (N, 3, H, W) images and int64 labels into (images of the input dtype, (N, K) float targets)."""
        n, _, height, width = images.shape
        return self.apply(images, labels, self.draw(n, height, width))

    def apply(self, images: torch.Tensor, labels: torch.Tensor, p: MixParams) -> tuple[torch.Tensor, torch.Tensor]:
        """Mix with drawn parameters ``p`` (``draw``'s); each sample ``i`` with ``partners(N, pairing)[i]``."""
        n, _, height, width = images.shape
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
        partner = partners(n, self.config.pairing).to(device)
        out = torch.lerp(source[partner], source, weight)  # theirs + w * (mine - theirs)
        if not images.is_floating_point():
            out = out.round_().to(images.dtype)
        lam = torch.from_numpy(p.lam).to(device).view(-1, 1)
        one_hot = smooth_one_hot(labels, self.config.num_classes, self.config.label_smoothing)
        return out, one_hot * lam + one_hot[partner] * (1 - lam)


def spread(values: np.ndarray, n: int, mode: str, pairing: str = "flip") -> np.ndarray:
    """Per-draw values as per-sample: ``batch`` repeats one; ``pair`` gives each partner the draw of ``i``
    (``flip``: ``N - 1 - i``, timm's ``_mix_pair``, an odd middle sample unmixed; ``halves``: ``i + N // 2``,
    an odd last sample unmixed): lambda 1, no box, for the unmixed one."""
    if mode == "batch":
        return np.repeat(values[:1], n, axis=0)
    if mode == "pair":
        alone = np.zeros((n % 2, *values.shape[1:]), values.dtype)
        if values.dtype != bool and values.ndim == 1:
            alone[:] = 1
        if pairing == "halves":
            return np.concatenate([values, values, alone])
        return np.concatenate([values, alone, values[::-1]])
    return values


def partners(n: int, pairing: str = "halves") -> torch.Tensor:
    """(n,) index of each sample's partner: the two halves pair up (an odd last sample pairs with itself), or,
    ``flip``, ``N - 1 - i`` (timm's ``x.flip(0)``)."""
    if pairing == "flip":
        return torch.arange(n - 1, -1, -1)
    half = n // 2
    index = torch.arange(n)
    index[:half] += half
    index[half:2 * half] -= half
    return index
