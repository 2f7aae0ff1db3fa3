"""Detections in the output's pixels taken back to the original image's, as COCO's evaluation scores them.

An evaluation batch (``DetectionLoader(train=False)``) carries, per image, ``orig_size`` (H, W), and the ``scale``
(x, y) and ``offset`` (x, y) of its view: a point of the image is at ``point * scale + offset`` in the output (the
whole image stretched: no offset; a letterbox: the padding before it; a centre crop: minus the cut). pycocotools'
``loadRes`` and ``COCOeval`` take boxes, keypoints and masks in the annotation's pixels, so a model's outputs go
back through the inverse: boxes clipped to the image (what falls in a letterbox's padding is outside it),
keypoints exactly (x, y inverted, visibility kept), masks sampled at each original pixel's centre.

A frame is an evaluation batch, one image's target dict of ``layout="torchvision"``, or a list of such dicts.
Values come as users hold them (int or float tensors, numpy arrays, lists per image); the arithmetic is float
(an int64 box once turned the 0.05 scale into 0). Anything else is one ValueError line naming what is wrong,
never a torch error from deep inside or a silent NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

FRAME = ("orig_size", "scale", "offset")
Frame = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # one image's (H, W), (sx, sy), (ox, oy): float64


def _tensor(values: Any, what: str, shape: str = "") -> torch.Tensor:
    """``values`` as a tensor (numpy and nested lists too); one line for what is not numbers."""
    try:
        tensor = torch.as_tensor(values)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"{what} must be a tensor or array of numbers{' ' + shape if shape else ''} (a list per "
                         f"image for a batch or a list of targets), got {type(values).__name__}") from None
    if (tensor.dtype == torch.bool and what != "masks") or tensor.is_complex():
        raise ValueError(f"{what} must hold real numbers, got {tensor.dtype}")
    return tensor


def _finite(values: torch.Tensor, what: str) -> torch.Tensor:
    if values.is_floating_point() and not bool(torch.isfinite(values).all()):
        bad = int((~torch.isfinite(values)).sum())
        raise ValueError(f"{what} hold {bad} NaN or infinite values: a model's output that diverged has no place "
                         "in the original image")
    return values


def _boxes(boxes: torch.Tensor, frame: Frame) -> torch.Tensor:
    """(..., 4) xyxy boxes of one image back through its frame, clipped to it, kept xyxy under a mirror."""
    size, scale, offset = frame
    out_dtype = boxes.dtype if boxes.is_floating_point() else torch.float32
    xy = (boxes.to(torch.float64).reshape(*boxes.shape[:-1], 2, 2) - offset) / scale
    low, high = torch.minimum(xy[..., 0, :], xy[..., 1, :]), torch.maximum(xy[..., 0, :], xy[..., 1, :])
    limit = size.flip(-1)  # (W, H): x then y, as the boxes hold them
    zero = torch.zeros_like(limit)
    return torch.cat([torch.minimum(torch.maximum(low, zero), limit),
                      torch.minimum(torch.maximum(high, zero), limit)], dim=-1).to(out_dtype)


def _keypoints(points: torch.Tensor, frame: Frame) -> torch.Tensor:
    """(..., P, 2 or 3) x, y[, visibility] back through the frame exactly; unlabelled points stay (0, 0, 0)."""
    _, scale, offset = frame
    out_dtype = points.dtype if points.is_floating_point() else torch.float32
    out = points.to(torch.float64).clone()
    out[..., :2] = (out[..., :2] - offset) / scale
    if points.shape[-1] == 3:  # COCO's unlabelled point is (0, 0, 0): no position to take back
        out[points[..., 2] <= 0] = 0
    return out.to(out_dtype)


def _masks(masks: torch.Tensor, frame: Frame) -> torch.Tensor:
    """(..., h, w) masks in the output's pixels as (..., H, W) at the original size: each original pixel's centre
    sampled where the view put it (bilinear for float scores, nearest for binary masks; zeros outside)."""
    size, scale, offset = frame
    height, width = (int(v) for v in size.tolist())
    flat = masks.reshape(-1, 1, *masks.shape[-2:])
    out_h, out_w = masks.shape[-2:]
    if flat.shape[0] == 0:
        return masks.new_zeros((*masks.shape[:-2], height, width))
    x = ((torch.arange(width, dtype=torch.float64) + 0.5) * scale[0] + offset[0]) / out_w * 2 - 1
    y = ((torch.arange(height, dtype=torch.float64) + 0.5) * scale[1] + offset[1]) / out_h * 2 - 1
    grid = torch.stack(torch.meshgrid(x, y, indexing="xy"), dim=-1).to(torch.float32)
    binary = not masks.is_floating_point()
    sampled = F.grid_sample(flat.to(torch.float32), grid.expand(len(flat), -1, -1, -1),
                            mode="nearest" if binary else "bilinear", padding_mode="zeros", align_corners=False)
    sampled = sampled.reshape(*masks.shape[:-2], height, width)
    return sampled.round().to(masks.dtype) if binary else sampled.to(masks.dtype)


def _frames(frame: Any) -> list[Frame] | Frame:
    """One image's frame (a target dict), or a list of them (an evaluation batch, a list of target dicts)."""
    if isinstance(frame, Sequence) and not isinstance(frame, (str, bytes)):
        if not all(isinstance(target, Mapping) for target in frame):
            raise ValueError("frame must be an evaluation batch, a target dict or a list of target dicts, got a "
                             f"list of {', '.join(sorted({type(t).__name__ for t in frame}))}")
        return [_one_frame(target) for target in frame]  # type: ignore[misc]
    if not isinstance(frame, Mapping):
        raise ValueError(f"frame must be an evaluation batch or a target dict, got {type(frame).__name__}")
    missing = [name for name in FRAME if name not in frame]
    if missing:
        raise ValueError(f"the batch holds no {missing[0]}: only evaluation batches (train=False) map back")
    size = _tensor(frame["orig_size"], "orig_size")
    if size.ndim == 1:
        return _one_frame(frame)
    scale, offset = (_tensor(frame[name], name).to(torch.float64) for name in ("scale", "offset"))
    return [(s.to(torch.float64), f, o) for s, f, o in zip(size, scale, offset, strict=True)]


def _one_frame(target: Mapping[str, Any]) -> Frame:
    missing = [name for name in FRAME if name not in target]
    if missing:
        raise ValueError(f"the target holds no {missing[0]}: only evaluation targets (train=False) map back")
    size, scale, offset = (_tensor(target[name], name).to(torch.float64) for name in FRAME)
    if size.shape != (2,) or scale.shape != (2,) or offset.shape != (2,):
        raise ValueError(f"a target's orig_size, scale and offset are 2 numbers each, got shapes {tuple(size.shape)}"
                         f", {tuple(scale.shape)}, {tuple(offset.shape)}")
    if not bool((scale != 0).all()):
        raise ValueError(f"the target's scale {scale.tolist()} has a zero: no view maps back through it")
    return size, scale, offset


def _mapped(values: Any, frame: Any, what: str, check: Callable[[torch.Tensor, str], None],
            one: Callable[[torch.Tensor, Frame], torch.Tensor], per_image: str) -> Any:
    """``values`` mapped by ``one`` through ``frame``'s image(s): one image's tensor, or per image of a batch
    (a tensor with the images first, or a list)."""
    frames = _frames(frame)
    if isinstance(frames, tuple):  # one image
        tensor = _tensor(values, what, per_image)
        check(tensor, "")
        return one(tensor, frames)
    many = isinstance(values, (list, tuple))
    tensors = [_tensor(v, what, per_image) for v in values] if many else _tensor(values, what, per_image)
    if len(tensors) != len(frames):
        raise ValueError(f"{len(tensors)} images' {what} for a frame of {len(frames)} images: give one per image")
    out = []
    for i, (tensor, image) in enumerate(zip(tensors, frames, strict=True)):
        check(tensor, f" of image {i}")
        out.append(one(tensor, image))
    return out if many else torch.stack(out) if out else tensors.to(torch.float32)


def to_original(boxes: Any, frame: Any) -> Any:
    """``boxes`` (x0, y0, x1, y1 in the output's pixels) in the original image's pixels, clipped to it.

    ``frame`` is an evaluation batch (``boxes`` then (N, K, 4), or a list of N (k, 4) tensors, one per image), a
    list of N target dicts of ``layout="torchvision"`` (a list of N boxes), or one target dict (``boxes`` (k, 4)).
    Integer boxes come back float32; a float dtype is kept. Raises ValueError in one line for a frame without
    ``orig_size``, ``scale`` and ``offset`` (a training batch: its crops and warps do not go back), boxes without
    4 coordinates, NaN or infinite boxes and a count of images that is not the frame's."""
    def check(tensor: torch.Tensor, where: str) -> None:
        if tensor.ndim != 2 or tensor.shape[-1] != 4:
            raise ValueError(f"boxes{where} must be (k, 4) x0, y0, x1, y1, got shape {tuple(tensor.shape)}")
        _finite(tensor, f"boxes{where}")
    return _mapped(boxes, frame, "boxes", check, _boxes, "(k, 4)")


def keypoints_to_original(keypoints: Any, frame: Any) -> Any:
    """``keypoints`` ((k, P, 3) x, y, visibility, or (k, P, 2), in the output's pixels) in the original image's:
    the exact inverse of the view's map (not clipped; COCO's OKS scores the positions), visibility kept, points of
    visibility 0 left (0, 0, 0). ``frame`` as ``to_original``'s (a batch's (N, K, P, 3) or a list per image)."""
    def check(tensor: torch.Tensor, where: str) -> None:
        if tensor.ndim != 3 or tensor.shape[-1] not in (2, 3):
            raise ValueError(f"keypoints{where} must be (k, P, 3) x, y, visibility (or (k, P, 2)), got shape "
                             f"{tuple(tensor.shape)}")
        _finite(tensor, f"keypoints{where}")
    return _mapped(keypoints, frame, "keypoints", check, _keypoints, "(k, P, 3)")


def masks_to_original(masks: Any, frame: Any) -> Any:
    """``masks`` ((k, h, w) in the output's pixels, or Mask R-CNN's (k, 1, h, w) scores) at the original image's
    size (k, H, W) (or (k, 1, H, W)): the inverse of the letterbox's placing or the crop, and the resize, in one
    sampling at each original pixel's centre (nearest for binary masks, bilinear for float scores, to threshold
    after). ``frame`` as ``to_original``'s; a batch's masks come as a list per image."""
    def check(tensor: torch.Tensor, where: str) -> None:
        if tensor.ndim < 2:
            raise ValueError(f"masks{where} must be (k, h, w) or (k, 1, h, w), got shape {tuple(tensor.shape)}")
        _finite(tensor, f"masks{where}")
    return _mapped(masks, frame, "masks", check, _masks, "(k, h, w)")
