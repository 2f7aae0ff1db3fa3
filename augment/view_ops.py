"""Multi-crop views' photometric ops (DINOv2's per-view ColorJitter, grayscale, blur, solarize), batched, any device.

The reference implementation: torchvision's tensor semantics (``transforms/_functional_tensor.py``) in
float32 on values in [0, 1], with one parameter per sample (``dataio.augment.view_params``):

- brightness, contrast, saturation blend ``f * x + (1 - f) * d`` with black, the mean of the image's
  grayscale, the grayscale image (ITU-R 601 weights 0.2989, 0.587, 0.114), clamped to [0, 1] after each op;
- hue shifts through torchvision's RGB -> HSV -> RGB; grayscale replicates the gray to 3 channels;
- Gaussian blur: ``blur_kernel`` taps ``exp(-x^2 / 2 sigma^2)`` normalised, reflect padding, one pass per axis
  (the 2-D kernel is their outer product, so two 1-D passes give the same sum with 2K instead of K^2 products);
- solarize: ``1 - x`` where ``x >= threshold / 255``;
- uint8 output rounds once, at the end: ``floor(255 x + 0.5)`` (round half up; the C kernel does the same);
  with ``mean``/``std`` the float values are normalised ``(x - mean) / std`` unrounded, in the same pass.

Speed and asynchrony: the draws are on the host, so which samples each op touches is known there; each op
gathers only those samples (``index_select``), works on them and puts them back, instead of running on the whole
batch with identity parameters (ColorJitter's random order alone would cost each sample 16 ops, not 4).
Everything the device needs (indices, factors, sigmas, mean/std) goes over in two copies, from pinned memory on
CUDA, with ``non_blocking``; no op reads a device value on the host, so a CUDA batch is queued without a sync.
``u8 / 255`` is ``u8 * float32(1/255)`` here and in the kernel, so both start from identical values and compare
a value against the solarize threshold identically.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from dataio.augment.view_params import IDENTITY, JITTER_OPS, MAX_KERNEL, ViewParams, ViewRecipe, draw_view_params

__all__ = ["INV255", "JITTER_OPS", "LUMA", "MAX_KERNEL", "ViewParams", "ViewRecipe", "apply_views", "check_arguments",
           "draw_view_params", "normalisation", "solarize_threshold"]

INV255 = 1.0 / 255.0  # as float32: the one scale from uint8 to [0, 1], shared with the C kernel
LUMA = (0.2989, 0.587, 0.114)  # torchvision's rgb_to_grayscale
CPU_PIXELS = 1 << 17  # pixels per slice of a CPU batch (2 views of 224 px, 14 of 96)


def solarize_threshold(threshold: int) -> float:
    """The float32 value in [0, 1] that ``threshold`` (0..255) becomes: ``threshold * float32(1/255)``, as images."""
    return float(np.float32(threshold) * np.float32(INV255))


def apply_views(images: torch.Tensor, params: ViewParams, *, out: torch.Tensor | None = None,
                mean: Sequence[float] | None = None, std: Sequence[float] | None = None) -> torch.Tensor:
    """Each view's photometric ops on uint8 ``images`` (N, 3, H, W), any memory format and device.

    Returns uint8 (N, 3, H, W), or float32 ``(x - mean) / std`` when ``mean`` and ``std`` (three values each, in
    [0, 1] units like torchvision's Normalize) are given; written into ``out`` when given (same shape and device,
    that dtype, any layout), else in the images' memory format."""
    norm = check_arguments(images, params, out, mean, std)
    if out is None:
        out = torch.empty_like(images, dtype=torch.float32 if norm else torch.uint8)
    if images.device.type == "cpu":  # slices of CPU_PIXELS: the float temporaries stay in cache (14 -> 4 ms a 224 px view)
        step = max(1, CPU_PIXELS // max(1, images.shape[2] * images.shape[3]))
        for i in range(0, len(images), step):
            _apply(images[i:i + step], params.rows(i, i + step), out[i:i + step], norm)
    elif len(images):
        _apply(images, params, out, norm)
    return out


def _apply(images: torch.Tensor, params: ViewParams, out: torch.Tensor, norm: tuple[float, ...] | None) -> None:
    device, n = images.device, len(images)
    steps, index = _host_plan(params)
    values = torch.cat([torch.from_numpy(params.host_arrays[1]).flatten(), torch.tensor(norm or (), dtype=torch.float32)])
    index, values = _to_device(index, device), _to_device(values, device)
    per_sample = values[:5 * n].view(n, 5)
    x = images.to(torch.float32).mul_(INV255)
    for (step, count), idx in zip(steps, index.split([count for _, count in steps]), strict=True):
        whole = count == n
        sub = x if whole else x.index_select(0, idx)
        column = JITTER_OPS.index(step) if step in JITTER_OPS else 4  # the factor, or sigma
        value = per_sample[:, column] if whole else per_sample[idx, column]
        _OPS[step](sub, value, params)
        if not whole:
            x.index_copy_(0, idx, sub)
    if norm is None:
        out.copy_(x.mul_(255.0).add_(0.5))  # round half up: the uint8 conversion truncates these non-negative values
    else:
        torch.div(x.sub_(values[5 * n:5 * n + 3].view(1, 3, 1, 1)), values[5 * n + 3:].view(1, 3, 1, 1), out=out)


def _host_plan(params: ViewParams) -> tuple[list[tuple[str, int]], torch.Tensor]:
    """``[(step, count)]`` in application order, and the samples of each step, concatenated (int64, host).

    One (19, N) mask, in numpy (a few small calls, not a hundred torch ones): step 4 p + op is jitter op ``op`` at
    position ``p``, then grayscale, blur, solarize. A jitter op is skipped for samples whose factor is its identity
    (a recipe with ``hue=0`` draws shifts of 0)."""
    plan, values = params.host_arrays
    flags, order = plan[:, 0], plan[:, 1:]
    active = (values[:, :4] != np.array(IDENTITY, np.float32)) & (flags[:, None] & 1).astype(bool)
    jitter = (order[:, :, None] == np.arange(4)) & active[:, None, :]  # (N, position, op)
    rest = [(flags & bit).astype(bool) for bit in (2, 4, 8)]
    masks = np.concatenate([jitter.reshape(len(plan), 16).T, np.stack(rest)])
    steps, samples = np.nonzero(masks)  # by step, then sample
    counts = np.bincount(steps, minlength=len(_STEPS_BY_ROW))
    return ([(_STEPS_BY_ROW[row], int(count)) for row, count in enumerate(counts) if count],
            torch.from_numpy(samples.astype(np.int64)))


_STEPS_BY_ROW = JITTER_OPS * 4 + ("grayscale", "blur", "solarize")


def _to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """One host-to-device copy that does not wait for the device: pinned on CUDA, ``non_blocking``."""
    if device.type == "cpu":
        return tensor
    if device.type == "cuda":
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)


def _per_sample(values: torch.Tensor) -> torch.Tensor:
    return values.view(-1, 1, 1, 1)


def gray(x: torch.Tensor) -> torch.Tensor:
    """(M, 1, H, W): torchvision's ``rgb_to_grayscale`` in its operation order."""
    return x[:, 0:1] * LUMA[0] + x[:, 1:2] * LUMA[1] + x[:, 2:3] * LUMA[2]


def _blend_(x: torch.Tensor, other: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """torchvision's ``_blend``: ``f * x + (1 - f) * other``, clamped to [0, 1]."""
    f = _per_sample(factor)
    return x.mul_(f).add_(other * (1.0 - f)).clamp_(0.0, 1.0)


def _brightness_(x: torch.Tensor, factor: torch.Tensor, params: ViewParams) -> None:
    x.mul_(_per_sample(factor)).clamp_(0.0, 1.0)  # the blend with black: (1 - f) * 0 adds nothing


def _contrast_(x: torch.Tensor, factor: torch.Tensor, params: ViewParams) -> None:
    _blend_(x, gray(x).mean(dim=(1, 2, 3), keepdim=True), factor)


def _saturation_(x: torch.Tensor, factor: torch.Tensor, params: ViewParams) -> None:
    _blend_(x, gray(x), factor)


def _hue_(x: torch.Tensor, shift: torch.Tensor, params: ViewParams) -> None:
    """torchvision's ``adjust_hue``: ``_rgb2hsv``, ``(h + shift) % 1``, ``_hsv2rgb``, in its arithmetic.

    Its sums of masked terms (one mask true) are selections here: the same values, without the 6-way einsum."""
    r, g, b = x.unbind(1)
    maxc, minc = x.amax(dim=1), x.amin(dim=1)
    eqc = maxc == minc
    cr = maxc - minc
    ones = torch.ones_like(maxc)
    s = cr / torch.where(eqc, ones, maxc)
    divisor = torch.where(eqc, ones, cr)
    rc, gc, bc = (maxc - r) / divisor, (maxc - g) / divisor, (maxc - b) / divisor
    h = torch.where(maxc == r, bc - gc, torch.where(maxc == g, 2.0 + rc - bc, 4.0 + gc - rc))
    h = torch.remainder(torch.fmod(h / 6.0 + 1.0, 1.0) + shift.view(-1, 1, 1), 1.0)
    i = torch.floor(h * 6.0)
    f = h * 6.0 - i
    i = i.to(torch.int32) % 6
    v = maxc
    p = (v * (1.0 - s)).clamp_(0.0, 1.0)
    q = (v * (1.0 - s * f)).clamp_(0.0, 1.0)
    t = (v * (1.0 - s * (1.0 - f))).clamp_(0.0, 1.0)
    red = torch.where((i == 0) | (i == 5), v, torch.where(i == 1, q, torch.where(i == 4, t, p)))
    green = torch.where((i == 1) | (i == 2), v, torch.where(i == 0, t, torch.where(i == 3, q, p)))
    blue = torch.where((i == 3) | (i == 4), v, torch.where(i == 2, t, torch.where(i == 5, q, p)))
    x.copy_(torch.stack((red, green, blue), dim=1))


def _grayscale_(x: torch.Tensor, value: torch.Tensor, params: ViewParams) -> None:
    x.copy_(gray(x).expand_as(x))


def blur_taps(sigma: torch.Tensor, kernel: int) -> torch.Tensor:
    """(M, kernel) float32 weights per sigma, torchvision's ``_get_gaussian_kernel1d`` in its arithmetic."""
    half = (kernel - 1) * 0.5
    taps = torch.linspace(-half, half, steps=kernel, dtype=torch.float32, device=sigma.device)
    pdf = torch.exp(-0.5 * (taps / sigma[:, None]).pow(2))
    return pdf / pdf.sum(dim=1, keepdim=True)


def _blur_(x: torch.Tensor, sigma: torch.Tensor, params: ViewParams) -> None:
    """Reflect-padded separable Gaussian blur, each sample its own sigma: K shifted slices weighted per sample,
    rows then columns (no grouped convolution with one group per sample and channel)."""
    kernel, height, width = params.blur_kernel, x.shape[2], x.shape[3]
    radius, weights = kernel // 2, blur_taps(sigma, kernel)
    padded = F.pad(x, (radius, radius, radius, radius), mode="reflect")
    rows = padded[..., :width] * _per_sample(weights[:, 0])
    for k in range(1, kernel):
        rows.add_(padded[..., k:k + width] * _per_sample(weights[:, k]))
    x.copy_(rows[:, :, :height] * _per_sample(weights[:, 0]))
    for k in range(1, kernel):
        x.add_(rows[:, :, k:k + height] * _per_sample(weights[:, k]))


def _solarize_(x: torch.Tensor, value: torch.Tensor, params: ViewParams) -> None:
    x.copy_(torch.where(x >= solarize_threshold(params.solarize_threshold), 1.0 - x, x))


_OPS = {"brightness": _brightness_, "contrast": _contrast_, "saturation": _saturation_, "hue": _hue_,
        "grayscale": _grayscale_, "blur": _blur_, "solarize": _solarize_}


def check_arguments(images: torch.Tensor, params: ViewParams, out: torch.Tensor | None, mean: Sequence[float] | None,
           std: Sequence[float] | None) -> tuple[float, ...] | None:
    """The normalisation as six floats (mean then std), or None for uint8 output; one ValueError naming what is wrong
    for a bad argument (the C kernel's wrapper checks with this too)."""
    if not isinstance(params, ViewParams):
        raise ValueError(f"params must be ViewParams (draw_view_params), got {type(params).__name__}")
    if not (isinstance(images, torch.Tensor) and images.dtype == torch.uint8 and images.dim() == 4
            and images.shape[1] == 3):
        got = f"{images.dtype} {tuple(images.shape)}" if isinstance(images, torch.Tensor) else type(images).__name__
        raise ValueError(f"images must be a uint8 (N, 3, H, W) tensor, got {got}")
    if len(params) != len(images):
        raise ValueError(f"params hold {len(params)} samples for {len(images)} images")
    radius = params.blur_kernel // 2
    if bool(params.blur.any()) and min(images.shape[2:]) <= radius:
        raise ValueError(f"images of {images.shape[2]}x{images.shape[3]} px are too small for a {params.blur_kernel}-tap "
                         f"blur (reflect padding needs each side > {radius})")
    norm = normalisation(mean, std)
    if out is not None:
        dtype = torch.uint8 if norm is None else torch.float32
        if not (isinstance(out, torch.Tensor) and out.dtype == dtype and out.shape == images.shape
                and out.device == images.device):
            got = f"{out.dtype} {tuple(out.shape)} on {out.device}" if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"out must be {dtype} {tuple(images.shape)} on {images.device}, got {got}")
    return norm


def normalisation(mean: Sequence[float] | None, std: Sequence[float] | None) -> tuple[float, ...] | None:
    """``mean + std`` as six floats, or None when neither is given; ValueError unless both are three finite numbers,
    std nonzero."""
    if (mean is None) != (std is None):
        raise ValueError("mean and std go together: give both or neither")
    if mean is None or std is None:
        return None
    try:
        norm = tuple(float(v) for v in mean) + tuple(float(v) for v in std)
    except (TypeError, ValueError):
        norm = ()
    if len(norm) != 6 or not all(np.isfinite(norm)) or 0.0 in norm[3:]:
        raise ValueError(f"mean and std must be three finite numbers each, std nonzero, got {mean!r:.40} and {std!r:.40}")
    return norm
