"""Per-sample affine maps of each geometric stage, for moving boxes and masks with the images.

Every map here is a (3, 3) float64 matrix taking a point of one stage's input
to its output, in **continuous pixel coordinates**: pixel ``i`` spans
``[i, i + 1)``, its centre is ``i + 0.5``, and an image of width ``W`` spans
``[0, W]``. That is the frame of PIL's ``resize(box=...)`` and
``Image.transform``, which the image stages reproduce, and of COCO boxes
(a box covering pixels 0-9 is ``[0, 10)``), so a box needs no half-pixel
correction at either end. Each stage's maps come from the very parameters its
image operation takes:

- ``crop_resize_maps``: the host crop boxes and flips the decoders take
  (``turbo_decode.decode_crop_into``, PIL's ``resize(box=...)`` on either of its paths,
  and ``DaliDecoder``'s slice + resize). DALI's slice rounds the box's ends to the
  nearest whole pixel (measured: an anchor of 10.49 crops from 10, 10.51 from 11),
  so for DALI pass ``np.round(boxes)``; whole-pixel boxes (RandomResizedCrop's,
  ``bbox_crop``'s) are the same for both decoders. Centre-crop boxes are fractional.
- ``device_crop_maps``: ``geometry_ops.crop_resize_flip`` (kornia's
  ``crop_and_resize``, ``align_corners=True`` on inclusive corners).
- ``randaugment_maps``: RandAugment's draws, through the same
  ``geometric_maps`` the torch warp and the C kernel both apply.
"""

from __future__ import annotations

import numpy as np
import torch

from dataio.augment.randaugment import GEOMETRIC, OPS, geometric_maps


def crop_resize_maps(boxes: np.ndarray, flipped: np.ndarray, out_width: int, out_height: int) -> np.ndarray:
    """(N, 3, 3) source-to-output maps of "resize ``boxes`` (x0, y0, x1, y1) to out_width x out_height, mirror
    the ``flipped`` rows".

    PIL samples output pixel centre ``j + 0.5`` at ``x0 + (j + 0.5) * (x1 - x0) / out_width``, so in
    continuous coordinates the map is exactly ``(x - x0) * out_width / (x1 - x0)``; a mirror is
    ``out_width - x``.
    """
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    flipped = np.asarray(flipped, dtype=bool).reshape(-1)
    sx = out_width / (boxes[:, 2] - boxes[:, 0])
    sy = out_height / (boxes[:, 3] - boxes[:, 1])
    maps = np.zeros((len(boxes), 3, 3))
    maps[:, 0, 0] = np.where(flipped, -sx, sx)
    maps[:, 0, 2] = np.where(flipped, out_width + boxes[:, 0] * sx, -boxes[:, 0] * sx)
    maps[:, 1, 1] = sy
    maps[:, 1, 2] = -boxes[:, 1] * sy
    maps[:, 2, 2] = 1.0
    return maps


def decoded_crop_boxes(boxes: np.ndarray, widths: np.ndarray, heights: np.ndarray) -> np.ndarray:
    """The boxes the turbo decoder really crops: each moved inside its image, at least one pixel wide and high.

    The same clamp as ``turbo_decode._clamped`` (tested equal): crop boxes drawn inside the image
    (every sampler here draws them so) come back unchanged.
    """
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    width, height = np.asarray(widths, dtype=np.float64), np.asarray(heights, dtype=np.float64)
    x0 = np.maximum(0.0, np.minimum(boxes[:, 0], width - 1.0))
    y0 = np.maximum(0.0, np.minimum(boxes[:, 1], height - 1.0))
    x1 = np.maximum(x0 + 1.0, np.minimum(boxes[:, 2], width))
    y1 = np.maximum(y0 + 1.0, np.minimum(boxes[:, 3], height))
    return np.stack([x0, y0, x1, y1], axis=1)


def device_crop_maps(boxes: np.ndarray, flipped: np.ndarray, size: int) -> np.ndarray:
    """(N, 3, 3) maps of ``geometry_ops.crop_resize_flip`` (the device crop) from the batch's pixels to size².

    kornia's ``crop_and_resize`` with ``align_corners=True`` puts output pixel centres 0 and
    ``size - 1`` on input centres ``x0`` and ``x1 - 1``: a scale of ``(size - 1) / (x1 - x0 - 1)``
    about those centres, not PIL's ``size / (x1 - x0)`` about the edges. A crop one pixel wide (or
    ``size`` 1) has no such scale; it is taken as 1 pixel to 1 pixel.
    """
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    flipped = np.asarray(flipped, dtype=bool).reshape(-1)
    span = max(size - 1, 1)
    sx = span / np.maximum(boxes[:, 2] - boxes[:, 0] - 1.0, 1.0)
    sy = span / np.maximum(boxes[:, 3] - boxes[:, 1] - 1.0, 1.0)
    maps = np.zeros((len(boxes), 3, 3))
    # x_out = 0.5 + (x - x0 - 0.5) * sx, or mirrored: 0.5 + (x1 - 0.5 - x) * sx
    maps[:, 0, 0] = np.where(flipped, -sx, sx)
    maps[:, 0, 2] = np.where(flipped, 0.5 + (boxes[:, 2] - 0.5) * sx, 0.5 - (boxes[:, 0] + 0.5) * sx)
    maps[:, 1, 1] = sy
    maps[:, 1, 2] = 0.5 - (boxes[:, 1] + 0.5) * sy
    maps[:, 2, 2] = 1.0
    return maps


def randaugment_maps(draws: tuple[torch.Tensor, torch.Tensor, torch.Tensor], height: int, width: int) -> np.ndarray:
    """(N, num_ops, 3, 3) forward maps of each sample's RandAugment slots; identity for photometric ops.

    ``draws`` is ``RandAugment.draw(n)``'s (ops, magnitude, sign), the ones to pass to
    ``RandAugment(images, draws=draws)``; ``height`` and ``width`` are the augmented images'
    (rotations turn about their centre, translations are fractions of them). The image ops
    take PIL's output-to-input maps; these are their inverses.
    """
    ops, magnitude, sign = draws
    first = len(OPS) - len(GEOMETRIC)
    maps = torch.eye(3, dtype=torch.float64).repeat(*ops.shape, 1, 1)
    geometric = ops >= first
    if bool(geometric.any()):
        inverse = geometric_maps(ops[geometric] - first, magnitude[geometric], sign[geometric], height, width)
        maps[geometric] = torch.linalg.inv(inverse)
    return maps.numpy()
