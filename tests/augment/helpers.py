"""Photo-like uint8 batches and PIL conversions shared by the augmentation tests."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from dataio.formats.images.synthetic import synthetic_image


def photo_batch(n: int, size: tuple[int, int] = (96, 128), seed: int = 0) -> torch.Tensor:
    """(n, 3, H, W) uint8 photo-like images (smooth regions and edges, like real photos)."""
    rng = np.random.default_rng(seed)
    images = [np.asarray(synthetic_image(i % 5, rng).convert("RGB").resize(size[::-1])) for i in range(n)]
    return torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).contiguous()


def to_pil(image: torch.Tensor) -> Image.Image:
    return Image.fromarray(image.permute(1, 2, 0).numpy())


def from_pil(image: Image.Image) -> torch.Tensor:
    return torch.from_numpy(np.array(image.convert("RGB"))).permute(2, 0, 1).contiguous()


def pil_op(image: Image.Image, name: str, magnitude: float, sign: float, fill: int = 128) -> Image.Image:
    """RandAugment op ``name`` on one PIL image with exactly the parameters the batch version draws."""
    from PIL import ImageEnhance, ImageOps

    from dataio.augment.randaugment import GEOMETRIC, OPS, geometric_maps, photometric_parameter

    m, s = torch.tensor([float(magnitude)]), torch.tensor([float(sign)])
    if name in GEOMETRIC:
        width, height = image.size
        maps = geometric_maps(torch.tensor([GEOMETRIC.index(name)]), m, s, height, width)[0]
        return image.transform(image.size, Image.AFFINE, tuple(maps[:2].flatten().tolist()),
                               resample=Image.BILINEAR, fillcolor=(fill,) * 3)
    p = float(photometric_parameter(name, m, s)[0])
    ops = {"Identity": lambda: image, "AutoContrast": lambda: ImageOps.autocontrast(image),
           "Equalize": lambda: ImageOps.equalize(image), "Solarize": lambda: ImageOps.solarize(image, p),
           "Posterize": lambda: ImageOps.posterize(image, int(p)),
           "Color": lambda: ImageEnhance.Color(image).enhance(p),
           "Contrast": lambda: ImageEnhance.Contrast(image).enhance(p),
           "Brightness": lambda: ImageEnhance.Brightness(image).enhance(p),
           "Sharpness": lambda: ImageEnhance.Sharpness(image).enhance(p)}
    assert set(ops) | set(GEOMETRIC) == set(OPS)
    return ops[name]()
