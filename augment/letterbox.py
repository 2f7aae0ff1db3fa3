"""Keep-ratio views of whole images: the longer side resized to the output's, the rest padded (a letterbox).

A detector's evaluation (and Faster R-CNN's training recipe) wants the whole
image undistorted: stretching a 640x480 photo to a square changes every object's
aspect ratio, which the model then learns or is scored on. Here each image keeps
its ratio: its longer side becomes ``size``, the shorter ``round(side * scale)``,
and it is placed in the middle of the ``size x size`` output (or ``height x width``: the
factor is then the one that fits both sides inside it; YOLO's letterbox:
the padding split evenly, so ``offset`` says where the image starts). The map from
the image's pixels to the output's is ``x * scale_x + offset_x`` (continuous
coordinates, PIL's resize: ``target_maps.crop_resize_maps``), mirrored inside the
placed image for a flipped sample.
"""

from __future__ import annotations

import numpy as np


def letterbox_places(widths: np.ndarray, heights: np.ndarray, size: int | tuple[int, int]) -> np.ndarray:
    """(N, 4) int64 x0, y0, x1, y1 of each image in its output (``size``: a side, or (height, width)): the image
    scaled by the one factor that fits it inside (its longer side, relative to the output's, fills it), the other
    side scaled by the same factor (at least one pixel), centred."""
    out_h, out_w = (size, size) if isinstance(size, (int, np.integer)) else size
    w, h = np.asarray(widths, np.float64), np.asarray(heights, np.float64)
    scale = np.minimum(out_w / w, out_h / h)
    placed_w = np.clip(np.round(w * scale), 1, out_w).astype(np.int64)
    placed_h = np.clip(np.round(h * scale), 1, out_h).astype(np.int64)
    x0, y0 = (out_w - placed_w) // 2, (out_h - placed_h) // 2
    return np.stack([x0, y0, x0 + placed_w, y0 + placed_h], axis=1)


def letterbox_maps(places: np.ndarray, widths: np.ndarray, heights: np.ndarray, flipped: np.ndarray) -> np.ndarray:
    """(N, 3, 3) source-to-output maps of "the whole image resized into ``places``, mirrored where ``flipped``"."""
    places = np.asarray(places, np.float64).reshape(-1, 4)
    flipped = np.asarray(flipped, bool).reshape(-1)
    sx = (places[:, 2] - places[:, 0]) / np.asarray(widths, np.float64)
    sy = (places[:, 3] - places[:, 1]) / np.asarray(heights, np.float64)
    maps = np.zeros((len(places), 3, 3))
    maps[:, 0, 0] = np.where(flipped, -sx, sx)
    maps[:, 0, 2] = np.where(flipped, places[:, 2], places[:, 0])
    maps[:, 1, 1] = sy
    maps[:, 1, 2] = places[:, 1]
    maps[:, 2, 2] = 1.0
    return maps
