"""torchvision's ``ColorJitter`` (as timm's ``create_transform`` uses it, on PIL images) on a batch, per sample.

Each sample draws, as ``ColorJitter.get_params`` does, a random order of the four adjustments and a factor
per adjustment, uniform in [max(0, 1 - b), 1 + b] for brightness, contrast and saturation; then applies them
in its order with PIL's semantics (``ImageEnhance`` Brightness, Contrast, Color: ``color_ops``), or, with
``prob`` < 1 (timm's ``color_jitter_prob``), not at all. Instead of a loop per sample, each of the four
positions runs every adjustment on the whole batch with factor 1 (no change) for the samples whose
adjustment at that position is another; an adjusted sample is truncated as PIL truncates to uint8 after
each adjustment, so chains stay within a level of torchvision's on PIL images. Hue is refused: its HSV round trip has no batched op here yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real

import torch

from dataio.augment import color_ops as color
from dataio.augment.seeding import RandomStage
from dataio.formats.errors import ConfigError

ADJUSTMENTS = ("brightness", "contrast", "saturation", "hue")  # torchvision's fn_idx order
APPLY = (color.brightness_, color.contrast_, color.color_)


@dataclass(frozen=True, kw_only=True)
class ColorJitterConfig:
    """Strengths as torchvision's ``ColorJitter(brightness, contrast, saturation, hue)``; ``prob`` to apply."""

    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    hue: float = 0.0
    prob: float = 1.0

    def __post_init__(self) -> None:
        for name in (*ADJUSTMENTS, "prob"):  # NaN passes every comparison (no jitter); inf gives black images
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
                raise ConfigError(f"{{0}} {name} must be a finite number, got {value!r:.40}", "color_jitter")
        if min(self.brightness, self.contrast, self.saturation) < 0 or not 0 <= self.prob <= 1:
            raise ConfigError("{0} strengths must be >= 0 and prob a probability", "color_jitter")
        if self.hue:
            raise ConfigError(f"{{0}} hue {self.hue} is not batched in dataio (an HSV round trip): give "
                              "brightness, contrast and saturation only", "color_jitter")

    @classmethod
    def from_timm(cls, color_jitter: float | tuple[float, ...] | list[float], prob: float | None = None
                  ) -> "ColorJitterConfig":
        """timm's ``color_jitter`` argument: one strength for three adjustments, or a 3- or 4-tuple."""
        if isinstance(color_jitter, Real):
            values: tuple = (color_jitter,) * 3
        elif isinstance(color_jitter, (tuple, list)) and len(color_jitter) in (3, 4):
            values = tuple(color_jitter)
        else:
            raise ConfigError(f"{{0}} is one number or 3 or 4 numbers (timm's), got {color_jitter!r:.60}",
                              "color_jitter")
        return cls(**dict(zip(ADJUSTMENTS[:len(values)], values, strict=True)), prob=1.0 if prob is None else prob)


@dataclass(frozen=True)
class JitterDraws:
    """Per sample: ``order`` (N, 4) adjustment indices, ``factors`` (N, 3) float, ``applied`` (N,) bool."""

    order: torch.Tensor
    factors: torch.Tensor
    applied: torch.Tensor


class ColorJitter(RandomStage):
    """``ColorJitter(ColorJitterConfig(...))(float [0, 255] NCHW batch)``, in place."""

    stream = 7

    def __init__(self, config: ColorJitterConfig) -> None:
        super().__init__()
        self.config = config

    def draw(self, n: int) -> JitterDraws:
        c, g = self.config, self.generator
        order = torch.argsort(torch.rand((n, 4), generator=g), dim=1)  # a uniform permutation per sample
        strengths = torch.tensor([c.brightness, c.contrast, c.saturation], dtype=torch.float64)
        low = (1 - strengths).clamp(min=0)
        factors = low + torch.rand((n, 3), generator=g, dtype=torch.float64) * (1 + strengths - low)
        factors = torch.where(strengths > 0, factors, torch.ones_like(factors))
        applied = torch.rand(n, generator=g) < c.prob
        return JitterDraws(order=order, factors=factors, applied=applied)

    def __call__(self, images: torch.Tensor, draws: JitterDraws | None = None) -> torch.Tensor:
        x = images.float()
        d = self.draw(len(x)) if draws is None else draws
        factors = torch.where(d.applied.view(-1, 1), d.factors, torch.ones_like(d.factors))
        for position in range(4):
            for index, apply in enumerate(APPLY):
                here = d.order[:, position] == index
                if bool((here & (factors[:, index] != 1)).any()):
                    factor = torch.where(here, factors[:, index], torch.ones_like(factors[:, index]))
                    x = apply(x, factor.to(x.device, x.dtype, non_blocking=True))
                    # PIL truncates each adjustment's result to uint8: so do the samples it adjusted
                    picked = here.to(x.device, non_blocking=True).view(-1, 1, 1, 1)
                    x = torch.where(picked, x.floor(), x)
        return x
