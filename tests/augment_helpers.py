"""Photo-like uint8 batches and PIL conversions shared by the augmentation tests."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from formats.synthetic import synthetic_image


def photo_batch(n: int, size: tuple[int, int] = (96, 128), seed: int = 0) -> torch.Tensor:
    """(n, 3, H, W) uint8 photo-like images (smooth regions and edges, like real photos)."""
    rng = np.random.default_rng(seed)
    images = [np.asarray(synthetic_image(i % 5, rng).convert("RGB").resize(size[::-1])) for i in range(n)]
    return torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).contiguous()


def to_pil(image: torch.Tensor) -> Image.Image:
    return Image.fromarray(image.permute(1, 2, 0).numpy())


def from_pil(image: Image.Image) -> torch.Tensor:
    return torch.from_numpy(np.array(image.convert("RGB"))).permute(2, 0, 1).contiguous()
