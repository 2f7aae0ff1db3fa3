"""Vectorised crop and flip parameters for a batch, drawn before decoding.

Boxes are ``(x0, y0, x1, y1)`` float64 rows in source-image pixels, as PIL's
``resize(box=...)`` takes them. The algorithms follow torchvision's
``RandomResizedCrop.get_params`` (10 tries, then a center crop with the ratio
clamped) and its center-crop evaluation transform.
"""

from __future__ import annotations

import math

import numpy as np

ATTEMPTS = 10


def random_resized_crop_boxes(
    widths: np.ndarray,
    heights: np.ndarray,
    rng: np.random.Generator,
    scale: tuple[float, float],
    ratio: tuple[float, float],
) -> np.ndarray:
    """(N, 4) crop boxes; each sample's first of ``ATTEMPTS`` draws that fits, else a fallback."""
    n = len(widths)
    w_img, h_img = widths.astype(np.float64), heights.astype(np.float64)
    area = w_img * h_img
    target_area = area[:, None] * rng.uniform(scale[0], scale[1], size=(n, ATTEMPTS))
    log_ratio = rng.uniform(math.log(ratio[0]), math.log(ratio[1]), size=(n, ATTEMPTS))
    aspect = np.exp(log_ratio)
    w = np.round(np.sqrt(target_area * aspect))
    h = np.round(np.sqrt(target_area / aspect))
    fits = (w > 0) & (h > 0) & (w <= w_img[:, None]) & (h <= h_img[:, None])
    first = np.argmax(fits, axis=1)
    found = fits[np.arange(n), first]
    w_pick, h_pick = w[np.arange(n), first], h[np.arange(n), first]
    u = rng.random((n, 2))
    x0 = np.floor(u[:, 0] * (w_img - w_pick + 1))
    y0 = np.floor(u[:, 1] * (h_img - h_pick + 1))
    # Fallback: whole image center crop with the aspect ratio clamped into range.
    in_ratio = w_img / h_img
    fw = np.where(in_ratio < ratio[0], w_img, np.where(in_ratio > ratio[1], np.round(h_img * ratio[1]), w_img))
    fh = np.where(in_ratio < ratio[0], np.round(w_img / ratio[0]), h_img)
    fw, fh = np.minimum(fw, w_img), np.minimum(fh, h_img)
    w_pick, h_pick = np.where(found, w_pick, fw), np.where(found, h_pick, fh)
    x0 = np.where(found, x0, np.floor((w_img - fw) / 2))
    y0 = np.where(found, y0, np.floor((h_img - fh) / 2))
    return np.stack([x0, y0, x0 + w_pick, y0 + h_pick], axis=1)


def center_crop_boxes(widths: np.ndarray, heights: np.ndarray, crop_ratio: float, aspect: float = 1.0) -> np.ndarray:
    """(N, 4) boxes equal to "resize shorter side to S / crop_ratio, center crop S"; with ``aspect`` (the output's
    width / height, a rectangular output), the largest centred window of that shape, its sides times
    ``crop_ratio``: the crop keeps the output's ratio, so resizing it stretches nothing."""
    widths, heights = np.asarray(widths, np.float64), np.asarray(heights, np.float64)
    crop_w = np.minimum(widths, heights * aspect) * crop_ratio
    crop_h = crop_w / aspect
    x0 = (widths - crop_w) / 2
    y0 = (heights - crop_h) / 2
    return np.stack([x0, y0, x0 + crop_w, y0 + crop_h], axis=1)


def flips(n: int, rng: np.random.Generator, probability: float) -> np.ndarray:
    """(N,) bool: which samples are flipped horizontally."""
    return rng.random(n) < probability
