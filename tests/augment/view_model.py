"""An independent model of one view's photometric ops: a straightforward float64 numpy loop per sample.

Written from torchvision's definitions, not from dataio's code: the hue goes pixel by pixel through Python's
``colorsys`` (the same HSV as torchvision's ``_rgb2hsv``/``_hsv2rgb``), the blur is a direct 2-D correlation with the
outer product of the 1-D Gaussian over a reflect-padded image, and nothing is fused or reordered.
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass

import numpy as np
import torch

from dataio.augment.view_params import ViewParams

LUMA = np.array([0.2989, 0.587, 0.114])


@dataclass
class Modelled:
    values: np.ndarray  # (H, W, 3) float64 in [0, 1], before any rounding
    near_threshold: np.ndarray  # (H, W, 3) bool: solarize saw a value within 1e-5 of its threshold (either side)


def gray(x: np.ndarray) -> np.ndarray:
    return x @ LUMA


def hue(x: np.ndarray, shift: float) -> np.ndarray:
    out = np.empty_like(x)
    for index in np.ndindex(x.shape[:2]):
        h, s, v = colorsys.rgb_to_hsv(*x[index])
        out[index] = colorsys.hsv_to_rgb((h + shift) % 1.0, s, v)
    return out


def blur(x: np.ndarray, sigma: float, kernel: int) -> np.ndarray:
    half = kernel // 2
    taps = np.exp(-0.5 * (np.arange(-half, half + 1) / sigma) ** 2)
    taps /= taps.sum()
    weights = np.outer(taps, taps)
    padded = np.pad(x, ((half, half), (half, half), (0, 0)), mode="reflect")
    height, width = x.shape[:2]
    out = np.zeros_like(x)
    for dy in range(kernel):
        for dx in range(kernel):
            out += weights[dy, dx] * padded[dy:dy + height, dx:dx + width]
    return out


def view(image: np.ndarray, params: ViewParams, i: int) -> Modelled:
    """Sample ``i`` of ``params`` on ``image`` (H, W, 3) uint8."""
    x = image.astype(np.float64) / 255
    b, c, s, h = (float(v) for v in params.factors[i])
    if params.jitter[i]:
        for op in params.order[i].tolist():
            if op == 0 and b != 1:
                x = np.clip(b * x, 0, 1)
            elif op == 1 and c != 1:
                x = np.clip(c * x + (1 - c) * gray(x).mean(), 0, 1)
            elif op == 2 and s != 1:
                x = np.clip(s * x + (1 - s) * gray(x)[..., None], 0, 1)
            elif op == 3 and h != 0:
                x = hue(x, h)
    if params.grayscale[i]:
        x = np.repeat(gray(x)[..., None], 3, axis=2)
    if params.blur[i]:
        x = blur(x, float(params.sigma[i]), params.blur_kernel)
    threshold = params.solarize_threshold / 255
    near = np.zeros(x.shape, bool)
    if params.solarize[i]:
        near = np.abs(x - threshold) < 1e-5
        x = np.where(x >= threshold, 1 - x, x)
    return Modelled(x, near)


def make_params(n: int, *, jitter: bool | list[bool] = False, order=(0, 1, 2, 3), factors=(1.0, 1.0, 1.0, 0.0),
                grayscale: bool | list[bool] = False, blur: bool | list[bool] = False, sigma: float | list[float] = 1.0,
                solarize: bool | list[bool] = False, blur_kernel: int = 9, solarize_threshold: int = 128) -> ViewParams:
    """ViewParams written by hand: one value for every sample, or a list of n."""
    def flags(value):
        return torch.tensor(value if isinstance(value, list) else [value] * n, dtype=torch.bool)

    order = torch.tensor(order, dtype=torch.int64)
    factors = torch.tensor(factors, dtype=torch.float32)
    return ViewParams(jitter=flags(jitter), order=order.expand(n, 4).clone() if order.dim() == 1 else order,
                      factors=factors.expand(n, 4).clone() if factors.dim() == 1 else factors,
                      grayscale=flags(grayscale), blur=flags(blur),
                      sigma=torch.tensor(sigma if isinstance(sigma, list) else [sigma] * n, dtype=torch.float32),
                      solarize=flags(solarize), blur_kernel=blur_kernel, solarize_threshold=solarize_threshold)
