"""torchvision's v1 transforms that DINOv2's ``DataAugmentationDINO`` uses, on PIL images, for the views baseline.

torchvision does not import with the CPU torch here, so the views benchmark's standard recipe needs its own copy.
Each class is a transcription of ``torchvision/transforms/transforms.py`` (0.29) and the PIL branch of
``functional.py`` / ``_functional_pil.py`` / ``_functional_tensor.py``: the same PIL calls, and the same random
draws from torch's global generator in the same order (``torch.rand(1)``, ``torch.randperm(4)``,
``torch.empty(1).uniform_``, ``torch.randint``), so a ``DataLoader`` worker seeded by torch behaves as one
running torchvision would, view for view. Only what DINOv2 calls is here (no tensor inputs, no torchscript).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as nnf
from PIL import Image, ImageEnhance, ImageOps

Transform = Callable[[Any], Any]


class Compose:
    """``transforms.Compose``: each transform in turn."""

    def __init__(self, transforms: list[Transform]) -> None:
        self.transforms = transforms

    def __call__(self, img: Any) -> Any:
        for t in self.transforms:
            img = t(img)
        return img


class RandomApply:
    """``transforms.RandomApply``: the list with probability ``p``. It draws ``torch.rand(1)`` even when ``p`` is 0
    or 1, as torchvision does, so the draws that follow do not move."""

    def __init__(self, transforms: list[Transform], p: float = 0.5) -> None:
        self.transforms, self.p = transforms, p

    def __call__(self, img: Any) -> Any:
        if self.p < torch.rand(1):
            return img
        for t in self.transforms:
            img = t(img)
        return img


class RandomHorizontalFlip:
    """``transforms.RandomHorizontalFlip``: ``Image.transpose(FLIP_LEFT_RIGHT)`` when ``torch.rand(1) < p``."""

    def __init__(self, p: float = 0.5) -> None:
        self.p = p

    def __call__(self, img: Image.Image) -> Image.Image:
        if torch.rand(1) < self.p:
            return img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        return img


class RandomResizedCrop:
    """``transforms.RandomResizedCrop(size, scale, ratio, interpolation)`` on PIL: ``get_params``' window, then
    ``Image.crop`` and ``Image.resize`` (two calls, as ``F.resized_crop`` makes them; PIL always antialiases)."""

    def __init__(self, size: int, scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
                 interpolation: Image.Resampling = Image.Resampling.BILINEAR) -> None:
        self.size, self.scale, self.ratio, self.interpolation = (size, size), scale, ratio, interpolation

    @staticmethod
    def get_params(img: Image.Image, scale: Sequence[float], ratio: Sequence[float]) -> tuple[int, int, int, int]:
        """(top, left, height, width): ten tries of an area and a log-uniform aspect ratio, then the central
        fallback. ``log_ratio`` is float32, as torchvision's (which passes its 0-d tensors: the same values), so
        the draws match."""
        width, height = img.size
        area = height * width
        log_ratio = torch.log(torch.tensor(ratio))
        for _ in range(10):
            target_area = area * torch.empty(1).uniform_(scale[0], scale[1]).item()
            aspect_ratio = torch.exp(torch.empty(1).uniform_(float(log_ratio[0]), float(log_ratio[1]))).item()
            w = int(round(math.sqrt(target_area * aspect_ratio)))
            h = int(round(math.sqrt(target_area / aspect_ratio)))
            if 0 < w <= width and 0 < h <= height:
                i = int(torch.randint(0, height - h + 1, size=(1,)).item())
                j = int(torch.randint(0, width - w + 1, size=(1,)).item())
                return i, j, h, w
        in_ratio = float(width) / float(height)
        if in_ratio < min(ratio):
            w, h = width, int(round(width / min(ratio)))
        elif in_ratio > max(ratio):
            h, w = height, int(round(height * max(ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def __call__(self, img: Image.Image) -> Image.Image:
        i, j, h, w = self.get_params(img, self.scale, self.ratio)
        img = img.crop((j, i, j + w, i + h))
        if (h, w) == self.size:  # F.resize returns the image untouched when it already has the size
            return img
        return img.resize((self.size[1], self.size[0]), self.interpolation)


def adjust_hue(img: Image.Image, hue_factor: float) -> Image.Image:
    """``_functional_pil.adjust_hue``: PIL's HSV, the hue channel shifted in uint8 (wrapping), back to RGB."""
    if not -0.5 <= hue_factor <= 0.5:
        raise ValueError(f"hue_factor ({hue_factor}) is not in [-0.5, 0.5].")
    if img.mode in {"L", "1", "I", "F"}:
        return img
    h, s, v = img.convert("HSV").split()
    np_h = np.array(h, dtype=np.uint8)
    np_h += np.int32(hue_factor * 255).astype(np.uint8)  # over/underflows, as torchvision intends
    return Image.merge("HSV", (Image.fromarray(np_h), s, v)).convert(img.mode)  # fromarray infers "L"


class ColorJitter:
    """``transforms.ColorJitter``: ``randperm(4)`` orders brightness, contrast, saturation, hue (PIL's
    ImageEnhance and ``adjust_hue``); each factor drawn up front, as ``get_params`` does."""

    def __init__(self, brightness: float = 0, contrast: float = 0, saturation: float = 0, hue: float = 0) -> None:
        self.brightness = self._check_input(brightness, 1.0, clip_first_on_zero=True)
        self.contrast = self._check_input(contrast, 1.0, clip_first_on_zero=True)
        self.saturation = self._check_input(saturation, 1.0, clip_first_on_zero=True)
        self.hue = self._check_input(hue, 0.0, clip_first_on_zero=False)

    @staticmethod
    def _check_input(value: float, center: float, clip_first_on_zero: bool) -> tuple[float, float] | None:
        """A single non-negative number ``v`` as torchvision reads it: ``[center - v, center + v]`` (the first
        clipped at 0 but for hue); None when it does nothing."""
        if value < 0:
            raise ValueError("a jitter amount must be non negative")
        low, high = center - float(value), center + float(value)
        if clip_first_on_zero:
            low = max(low, 0.0)
        return None if low == high == center else (low, high)

    @staticmethod
    def get_params(brightness: tuple[float, float] | None, contrast: tuple[float, float] | None,
                   saturation: tuple[float, float] | None, hue: tuple[float, float] | None
                   ) -> tuple[torch.Tensor, float | None, float | None, float | None, float | None]:
        """The order and the four factors, drawn in torchvision's order (``None`` for a disabled one: no draw)."""
        fn_idx = torch.randperm(4)
        b = None if brightness is None else float(torch.empty(1).uniform_(brightness[0], brightness[1]))
        c = None if contrast is None else float(torch.empty(1).uniform_(contrast[0], contrast[1]))
        s = None if saturation is None else float(torch.empty(1).uniform_(saturation[0], saturation[1]))
        h = None if hue is None else float(torch.empty(1).uniform_(hue[0], hue[1]))
        return fn_idx, b, c, s, h

    def __call__(self, img: Image.Image) -> Image.Image:
        fn_idx, b, c, s, h = self.get_params(self.brightness, self.contrast, self.saturation, self.hue)
        for fn_id in fn_idx:
            if fn_id == 0 and b is not None:
                img = ImageEnhance.Brightness(img).enhance(b)
            elif fn_id == 1 and c is not None:
                img = ImageEnhance.Contrast(img).enhance(c)
            elif fn_id == 2 and s is not None:
                img = ImageEnhance.Color(img).enhance(s)
            elif fn_id == 3 and h is not None:
                img = adjust_hue(img, h)
        return img


class RandomGrayscale:
    """``transforms.RandomGrayscale``: with ``torch.rand(1) < p``, ``convert("L")`` stacked back to as many
    channels as the input had (``_functional_pil.to_grayscale``)."""

    def __init__(self, p: float = 0.1) -> None:
        self.p = p

    def __call__(self, img: Image.Image) -> Image.Image:
        channels = len(img.getbands())
        if torch.rand(1) < self.p:
            gray = img.convert("L")
            if channels == 1:
                return gray
            plane = np.array(gray, dtype=np.uint8)
            return Image.fromarray(np.dstack([plane, plane, plane]))  # "RGB", inferred
        return img


def _gaussian_kernel1d(kernel_size: int, sigma: float) -> torch.Tensor:
    ksize_half = (kernel_size - 1) * 0.5
    x = torch.linspace(-ksize_half, ksize_half, steps=kernel_size, dtype=torch.float32)
    pdf = torch.exp(-0.5 * (x / sigma).pow(2))
    return pdf / pdf.sum()


def gaussian_blur(img: Image.Image, kernel_size: int, sigma: float) -> Image.Image:
    """``F.gaussian_blur`` on a PIL image, as torchvision runs it: ``pil_to_tensor`` (uint8 CHW), to float32,
    reflect padding, one depthwise ``conv2d`` with the full 2-D kernel (the outer product of the 1-D ones, not
    two separable passes), ``round``, back to uint8 and to PIL through ``Image.frombuffer``.

    Not PIL's ``ImageFilter.GaussianBlur``: that is a box-blur approximation with another radius, another
    border rule (edge pixels, not reflection) and another cost, and the baseline must do torchvision's work."""
    pixels = torch.as_tensor(np.array(img, copy=True)).view(img.size[1], img.size[0], len(img.getbands()))
    pixels = pixels.permute((2, 0, 1))  # pil_to_tensor: a CHW view, not made contiguous
    k1 = _gaussian_kernel1d(kernel_size, sigma)
    kernel = torch.mm(k1[:, None], k1[None, :])
    kernel = kernel.expand(pixels.shape[-3], 1, kernel.shape[0], kernel.shape[1])
    x = pixels.unsqueeze(dim=0).to(torch.float32)
    half = kernel_size // 2
    x = nnf.pad(x, [half, half, half, half], mode="reflect")
    x = nnf.conv2d(x, kernel, groups=x.shape[-3])
    out = torch.round(x.squeeze(dim=0)).to(torch.uint8)
    array = out.permute((1, 2, 0)).numpy(force=True)  # to_pil_image with mode=img.mode
    return Image.frombuffer(img.mode, (array.shape[1], array.shape[0]), array.tobytes(), "raw", img.mode, 0, 1)


class GaussianBlur:
    """``transforms.GaussianBlur(kernel_size, sigma=(min, max))``: sigma from ``torch.empty(1).uniform_``."""

    def __init__(self, kernel_size: int, sigma: tuple[float, float] = (0.1, 2.0)) -> None:
        if kernel_size <= 0 or kernel_size % 2 == 0:
            raise ValueError("Kernel size value should be an odd and positive number.")
        self.kernel_size, self.sigma = kernel_size, sigma

    def __call__(self, img: Image.Image) -> Image.Image:
        sigma = torch.empty(1).uniform_(self.sigma[0], self.sigma[1]).item()
        return gaussian_blur(img, self.kernel_size, sigma)


class RandomSolarize:
    """``transforms.RandomSolarize``: ``ImageOps.solarize`` (pixels >= threshold inverted) when
    ``torch.rand(1).item() < p``."""

    def __init__(self, threshold: int, p: float = 0.5) -> None:
        self.threshold, self.p = threshold, p

    def __call__(self, img: Image.Image) -> Image.Image:
        if torch.rand(1).item() < self.p:
            return ImageOps.solarize(img, self.threshold)
        return img


class ToTensor:
    """``transforms.ToTensor`` on a uint8 PIL image: an HWC copy, made CHW-contiguous, to float32, ``div(255)``."""

    def __call__(self, pic: Image.Image) -> torch.Tensor:
        img = torch.from_numpy(np.array(pic, np.uint8, copy=True))
        img = img.view(pic.size[1], pic.size[0], len(pic.getbands())).permute((2, 0, 1)).contiguous()
        return img.to(dtype=torch.get_default_dtype()).div(255)


class Normalize:
    """``transforms.Normalize(mean, std)`` (not in place: it clones first, as torchvision does by default)."""

    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        self.mean, self.std = mean, std

    def __call__(self, tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.clone()
        mean = torch.as_tensor(self.mean, dtype=tensor.dtype).view(-1, 1, 1)
        std = torch.as_tensor(self.std, dtype=tensor.dtype).view(-1, 1, 1)
        return tensor.sub_(mean).div_(std)
