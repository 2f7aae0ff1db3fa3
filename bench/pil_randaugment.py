"""RandAugment on one PIL image at a time: what a Dataset-side transform does (timm's ops).

This is the baseline ``dataio bench augment`` compares the batched version
against: the same 14 ops and magnitude scale, applied per image with PIL.
"""

from __future__ import annotations

import random

from PIL import Image, ImageEnhance, ImageOps

from dataio.augment.randaugment import OPS

FILL = (128, 128, 128)


def _signed(magnitude: float, scale: float, rng: random.Random) -> float:
    return magnitude / 10 * scale * (-1 if rng.random() < 0.5 else 1)


def _affine(image: Image.Image, coefficients: tuple) -> Image.Image:
    return image.transform(image.size, Image.AFFINE, coefficients, resample=Image.BILINEAR, fillcolor=FILL)


def apply_op(name: str, image: Image.Image, magnitude: float, rng: random.Random) -> Image.Image:
    """One RandAugment op on a PIL RGB image (magnitude on the 0-10 scale)."""
    w, h = image.size
    enhance = {"Color": ImageEnhance.Color, "Contrast": ImageEnhance.Contrast,
               "Brightness": ImageEnhance.Brightness, "Sharpness": ImageEnhance.Sharpness}
    if name in enhance:
        return enhance[name](image).enhance(1 + _signed(magnitude, 0.9, rng))
    if name == "Identity":
        return image
    if name == "AutoContrast":
        return ImageOps.autocontrast(image)
    if name == "Equalize":
        return ImageOps.equalize(image)
    if name == "Solarize":
        return ImageOps.solarize(image, int(256 - magnitude / 10 * 256))
    if name == "Posterize":
        return ImageOps.posterize(image, int(8 - round(magnitude / 10 * 4)))
    if name == "Rotate":
        return image.rotate(_signed(magnitude, 30, rng), resample=Image.BILINEAR, fillcolor=FILL)
    if name == "ShearX":
        return _affine(image, (1, _signed(magnitude, 0.3, rng), 0, 0, 1, 0))
    if name == "ShearY":
        return _affine(image, (1, 0, 0, _signed(magnitude, 0.3, rng), 1, 0))
    if name == "TranslateX":
        return _affine(image, (1, 0, _signed(magnitude, 0.45 * w, rng), 0, 1, 0))
    if name == "TranslateY":
        return _affine(image, (1, 0, 0, 0, 1, _signed(magnitude, 0.45 * h, rng)))
    raise ValueError(f"unknown op {name!r}")


class PilRandAugment:
    """``PilRandAugment(num_ops, magnitude, seed)(image) -> image``, ops drawn per call."""

    def __init__(self, num_ops: int = 2, magnitude: float = 9.0, seed: int = 0) -> None:
        self.ops, self.num_ops, self.magnitude = OPS, num_ops, magnitude
        self.rng = random.Random(seed)

    def __call__(self, image: Image.Image) -> Image.Image:
        for name in self.rng.choices(self.ops, k=self.num_ops):
            image = apply_op(name, image, self.magnitude, self.rng)
        return image
