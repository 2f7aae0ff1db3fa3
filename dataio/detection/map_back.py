"""Detections in the output's pixels taken back to the original image's, as COCO's evaluation scores them.

An evaluation batch (``DetectionLoader(train=False)``) carries, per image, ``orig_size`` (H, W), and the ``scale``
(x, y) and ``offset`` (x, y) of its view: a point of the image is at ``point * scale + offset`` in the output (the
whole image stretched: no offset; a letterbox: the padding before it; a centre crop: minus the cut). pycocotools'
``loadRes`` and ``COCOeval`` take boxes in the annotation's pixels, so a model's boxes go back through the inverse,
clipped to the image (what falls in a letterbox's padding is outside it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


def _one(boxes: torch.Tensor, size: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """(..., 4) xyxy boxes of one image back through its frame, clipped to it, kept xyxy under a mirror."""
    scale, offset = scale.to(boxes)[..., None, :], offset.to(boxes)[..., None, :]  # over both corners
    xy = (boxes.reshape(*boxes.shape[:-1], 2, 2) - offset) / scale
    low, high = torch.minimum(xy[..., 0, :], xy[..., 1, :]), torch.maximum(xy[..., 0, :], xy[..., 1, :])
    limit = size.flip(-1).to(boxes)  # (W, H): x then y, as the boxes hold them
    zero = torch.zeros_like(limit)
    return torch.cat([torch.minimum(torch.maximum(low, zero), limit),
                      torch.minimum(torch.maximum(high, zero), limit)], dim=-1)


def to_original(boxes: torch.Tensor | list[torch.Tensor], frame: Mapping[str, Any]) -> Any:
    """``boxes`` (x0, y0, x1, y1 in the output's pixels) in the original image's pixels.

    ``frame`` is an evaluation batch (``boxes`` then (N, K, 4), or a list of N (k, 4) tensors, one per image) or
    one image's target dict of ``layout="torchvision"`` (``boxes`` (k, 4)). Raises ValueError for a frame without
    ``orig_size``, ``scale`` and ``offset`` (a training batch: its crops and warps do not go back)."""
    missing = [name for name in ("orig_size", "scale", "offset") if name not in frame]
    if missing:
        raise ValueError(f"the batch holds no {missing[0]}: only evaluation batches (train=False) map back")
    size, scale, offset = (torch.as_tensor(frame[name]) for name in ("orig_size", "scale", "offset"))
    if size.ndim == 1:  # one image's target dict
        return _one(torch.as_tensor(boxes), size, scale, offset)
    if isinstance(boxes, (list, tuple)):
        return [_one(b, s, f, o) for b, s, f, o in zip(boxes, size, scale, offset, strict=True)]
    return _one(boxes, size[:, None], scale[:, None], offset[:, None])
