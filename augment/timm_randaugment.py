"""timm's RandAugment on a batch, per sample, with timm's op set, levels and per-op probability.

``TimmRandAugment(TimmRandAugmentConfig.from_timm("rand-m9-mstd0.5-inc1"))(uint8 NCHW batch)``: every sample
draws ``num_ops`` ops with replacement from timm's 15 (``dataio.augment.timm_strings``), applies each with
probability ``prob``, and draws its magnitude per application (Gaussian ``magnitude_std``, or uniform when
infinite), clipped to [0, ``magnitude_max`` or 10], then maps it to the op's argument with timm's level
functions (``timm_arguments``, e.g. ``PosterizeIncreasing`` keeps ``4 - int(m / 10 * 4)`` bits). As in
``RandAugment``, each op slot sorts the batch by op so every op runs once on a contiguous slice, on the
device, with the batched PIL-semantics ops of ``color_ops`` and ``geometry_ops``; draws are on the host.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dataio.augment import color_ops as color
from dataio.augment import geometry_ops as geometry
from dataio.augment.seeding import RandomStage
from dataio.augment.timm_strings import LEVEL_DENOM, TIMM_OPS, TimmRandAugmentConfig

SKIPPED = len(TIMM_OPS)  # op code of a drawn op that its probability left out
GEOMETRIC = {"Rotate": geometry.ROTATE, "ShearX": geometry.SHEAR_X, "ShearY": geometry.SHEAR_Y,
             "TranslateXRel": geometry.TRANSLATE_X, "TranslateYRel": geometry.TRANSLATE_Y}
ENHANCE = {"Color": color.color_, "Contrast": color.contrast_, "Brightness": color.brightness_,
           "Sharpness": color.sharpness_}


@dataclass(frozen=True)
class TimmDraws:
    """Host draws, each (N, num_ops): op code (``SKIPPED`` when not applied), magnitude, sign (+-1)."""

    ops: torch.Tensor
    magnitude: torch.Tensor
    sign: torch.Tensor


def timm_arguments(name: str, magnitude: torch.Tensor, sign: torch.Tensor, increasing: bool,
                   translate_pct: float = 0.45) -> torch.Tensor:
    """timm's ``LEVEL_TO_ARG[name]`` per sample (float64): degrees, shear, translate share, bits, threshold,
    addend or enhance factor; 0 for ops without one. ``sign`` is timm's ``_randomly_negate``."""
    level = magnitude.double() / LEVEL_DENOM
    sign = sign.double()
    if name == "Rotate":
        return level * 30 * sign
    if name in ("ShearX", "ShearY"):
        return level * 0.3 * sign
    if name in ("TranslateXRel", "TranslateYRel"):
        return level * translate_pct * sign
    if name == "Posterize":
        bits = torch.floor(level * 4)
        return 4 - bits if increasing else bits
    if name == "Solarize":
        threshold = torch.clamp(torch.floor(level * 256), max=256)
        return 256 - threshold if increasing else threshold
    if name == "SolarizeAdd":
        return torch.clamp(torch.floor(level * 110), max=128)
    if name in ENHANCE:
        return torch.clamp(1 + sign * level * 0.9, min=0.1) if increasing else level * 1.8 + 0.1
    return torch.zeros_like(level)


class TimmRandAugment(RandomStage):
    """Per-sample timm RandAugment on ``(N, 3, H, W)`` uint8 or float [0, 255] batches."""

    stream = 1  # RandAugment's stream: a loader has one RandAugment stage or the other

    def __init__(self, config: TimmRandAugmentConfig | None = None) -> None:
        super().__init__()
        self.config = config or TimmRandAugmentConfig()

    def draw(self, n: int) -> TimmDraws:
        """Ops with replacement, applied with ``prob``; magnitudes with timm's noise and clip; signs."""
        c, g = self.config, self.generator
        shape = (n, c.num_ops)
        ops = torch.randint(len(TIMM_OPS), shape, generator=g)
        applied = torch.rand(shape, generator=g, dtype=torch.float64) <= c.prob  # timm skips if random() > p
        uniform = torch.rand(shape, generator=g, dtype=torch.float64)
        noise = torch.randn(shape, generator=g, dtype=torch.float64)
        magnitude = torch.full(shape, float(c.magnitude), dtype=torch.float64)
        if c.magnitude_std == float("inf"):
            magnitude = uniform * c.magnitude
        elif c.magnitude_std > 0:
            magnitude = magnitude + noise * c.magnitude_std
        magnitude = magnitude.clamp(0, c.magnitude_max or LEVEL_DENOM)
        sign = torch.where(torch.rand(shape, generator=g) > 0.5, -1.0, 1.0)  # timm negates if random() > 0.5
        return TimmDraws(ops=torch.where(applied, ops, SKIPPED), magnitude=magnitude, sign=sign)

    def uses_kernel(self, device: torch.device, dtype: torch.dtype) -> bool:
        """Never: timm's op set has no C kernel (the chain asks)."""
        return False

    def __call__(self, images: torch.Tensor, *, output: str | None = None, draws: TimmDraws | None = None
                 ) -> torch.Tensor:
        """Augment the batch; ``output`` ("uint8" or "float") overrides the config's for this call."""
        if images.ndim != 4 or images.shape[1] != 3:
            raise ValueError(f"TimmRandAugment expects (N, 3, H, W) images, got {tuple(images.shape)}")
        n = images.shape[0]
        d = self.draw(n) if draws is None else draws
        x, order = images, torch.arange(n)  # x[i] holds sample order[i]
        for slot in range(self.config.num_ops):
            perm = torch.argsort(d.ops[order, slot], stable=True)
            order = order[perm]
            x = x.index_select(0, perm.to(x.device, non_blocking=True)).float()
            self._apply_slot(x, d.ops[order, slot], d.magnitude[order, slot], d.sign[order, slot])
        x = x.float()
        x = x.index_select(0, torch.argsort(order).to(x.device, non_blocking=True))
        return x if (output or self.config.output) == "float" else x.round_().clamp_(0, 255).to(torch.uint8)

    def _apply_slot(self, x: torch.Tensor, ops: torch.Tensor, magnitude: torch.Tensor, sign: torch.Tensor) -> None:
        """Apply each op to its contiguous run of ``x`` (sorted by op code), in place."""
        counts = torch.bincount(ops, minlength=SKIPPED + 1).tolist()
        starts = [sum(counts[:i]) for i in range(SKIPPED + 1)]
        height, width = x.shape[-2:]
        for code, name in enumerate(TIMM_OPS):
            lo, hi = starts[code], starts[code + 1]
            if hi == lo:
                continue
            run = x[lo:hi]
            argument = timm_arguments(name, magnitude[lo:hi], sign[lo:hi], self.config.increasing,
                                      self.config.translate_pct)
            # clipped after each op, as PIL's uint8 images are: a warp's float error (255.00002, -0.00002) would
            # otherwise reach the next op, and kornia's equalize refuses values outside [0, 1]
            run.copy_(self._op(name, run, argument, height, width).clamp_(0, 255))

    def _op(self, name: str, x: torch.Tensor, argument: torch.Tensor, height: int, width: int) -> torch.Tensor:
        """One op on a slice with per-sample host arguments (timm's PIL op of the same name)."""
        value = argument.to(x.device, torch.float32, non_blocking=True)
        if name == "AutoContrast":
            return color.autocontrast_(x)
        if name == "Equalize":
            return color.equalize(x)
        if name == "Invert":
            return x.neg_().add_(255)
        if name == "Posterize":
            return color.posterize_(x, value.clamp(0, 8))
        if name == "Solarize":
            return color.solarize(x, value)
        if name == "SolarizeAdd":  # timm's solarize_add: values below 128 get the addend, capped at 255
            return torch.where(x < 128, (x + value.view(-1, 1, 1, 1)).clamp_(max=255), x)
        if name in ENHANCE:
            return ENHANCE[name](x, value)
        kind = torch.full((len(argument),), GEOMETRIC[name])
        amount = argument * (width if name == "TranslateXRel" else height if name == "TranslateYRel" else 1)
        maps = geometry.pil_inverse_maps(kind, amount, height, width)
        fill = torch.tensor(self.config.fill, device=x.device, dtype=x.dtype).view(1, 3, 1, 1)  # per channel
        return geometry.warp(x, geometry.forward_matrices(maps), fill, self.config.interpolation)
