"""Batched photometric ops with one parameter per sample, PIL semantics.

Images are float32 ``(N, 3, H, W)`` with values in [0, 255] (any memory
format); every per-sample parameter is an ``(N,)`` tensor on the same device.
The definitions follow PIL's ``ImageOps`` / ``ImageEnhance`` (what timm's and
torchvision's RandAugment apply): enhance ops blend with a degenerate image,
``out = degenerate + factor * (image - degenerate)``, then clip. PIL rounds
down to uint8 after every op; these keep floats and round once at the end of
a chain, so a single op differs from PIL by at most one level (see the tests).
No op reads tensor values on the host. Ops ending in ``_`` overwrite their
input (a slice of the batch, so no copy) and return it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from kornia.enhance import equalize as kornia_equalize

LUMA = (0.299, 0.587, 0.114)  # PIL's ITU-R 601 "L" conversion


def _per_sample(values: torch.Tensor) -> torch.Tensor:
    return values.view(-1, 1, 1, 1)


def grayscale(x: torch.Tensor) -> torch.Tensor:
    """(N, 1, H, W) luma, as PIL's ``convert("L")`` before rounding."""
    return LUMA[0] * x[:, 0:1] + LUMA[1] * x[:, 1:2] + LUMA[2] * x[:, 2:3]


def blend_(degenerate: torch.Tensor, x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """``x = degenerate + factor * (x - degenerate)`` clipped to [0, 255], per-sample ``factor``."""
    return x.sub_(degenerate).mul_(_per_sample(factor)).add_(degenerate).clamp_(0, 255)


def brightness_(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """``ImageEnhance.Brightness``: blend with black."""
    return x.mul_(_per_sample(factor)).clamp_(0, 255)


def color_(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """``ImageEnhance.Color``: blend with the grayscale image."""
    return blend_(grayscale(x), x, factor)


def contrast_(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """``ImageEnhance.Contrast``: blend with the image's mean gray level (rounded, as PIL)."""
    mean = torch.floor(grayscale(x).mean(dim=(1, 2, 3), keepdim=True) + 0.5)
    return blend_(mean, x, factor)


def sharpness_(x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """``ImageEnhance.Sharpness``: blend with PIL's SMOOTH filter; border pixels unchanged."""
    # SMOOTH is [[1,1,1],[1,5,1],[1,1,1]] / 13 = (9 * box3x3 + 4 * centre) / 13.
    inner = x[:, :, 1:-1, 1:-1]
    smooth = (9 * F.avg_pool2d(x, kernel_size=3, stride=1)).add_(inner, alpha=4).div_(13).round_()
    blend_(smooth, inner, factor)
    return x


def solarize(x: torch.Tensor, threshold: torch.Tensor) -> torch.Tensor:
    """``ImageOps.solarize``: invert every value at or above ``threshold``."""
    return torch.where(x >= _per_sample(threshold), 255 - x, x)


def posterize_(x: torch.Tensor, bits: torch.Tensor) -> torch.Tensor:
    """``ImageOps.posterize``: keep the ``bits`` high bits of each value (bits in 1..8)."""
    step = _per_sample(torch.exp2(8 - bits.to(x.dtype)))
    return x.floor_().div_(step).floor_().mul_(step)


def autocontrast_(x: torch.Tensor) -> torch.Tensor:
    """``ImageOps.autocontrast`` (cutoff 0): stretch each channel to [0, 255]; flat channels kept."""
    lo = x.amin(dim=(2, 3), keepdim=True)
    hi = x.amax(dim=(2, 3), keepdim=True)
    flat = hi <= lo
    scale = torch.where(flat, torch.ones_like(hi), 255 / torch.where(flat, torch.ones_like(hi), hi - lo))
    return x.sub_(torch.where(flat, torch.zeros_like(lo), lo)).mul_(scale).clamp_(0, 255)


def equalize(x: torch.Tensor) -> torch.Tensor:
    """``ImageOps.equalize``: per-channel histogram equalisation (kornia's batched PIL port)."""
    return kornia_equalize(x.floor().clamp_(0, 255) / 255) * 255  # kornia refuses values outside [0, 1]
