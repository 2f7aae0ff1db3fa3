"""A detection item's per-object fields (``iscrowd``, ``keypoints``) as torchvision tv_tensors that v2 transforms
move and filter with the boxes. Imported only where torchvision imports (``tv_targets``): it imports torchvision.

torchvision's ``SanitizeBoundingBoxes`` filters the boxes, the labels and every ``tv_tensors.Mask``, and leaves
any other tensor alone: a plain ``iscrowd`` kept its K rows after references/detection's SSD preset dropped boxes
(3 boxes, 3 labels, 4 crowd flags). torchvision's ``KeyPoints`` are (..., 2), with no visibility, flip to
``W - 1 - x`` (pixel indices) and are not filtered either, while COCO's points (and keypoint R-CNN's target) are
(K, P, 3) in the boxes' continuous frame (``W - x``, as torchvision's references flip them). So both fields are
``Mask`` subclasses (filtered with the boxes) with their own kernel for every functional torchvision registers
for masks (none of them then treats the field as pixels): ``PerObject`` keeps its values and follows the canvas;
``ObjectKeyPoints`` moves x, y by torchvision's own keypoint kernels (a flip gives ``W - x``), and a point that
leaves the canvas becomes (0, 0, 0), COCO's unlabelled point, as dataio's own maps make it. A v2 flip does not
swap left and right points (torchvision's transforms do not know which they are; dataio's loader flips do).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torchvision import tv_tensors  # type: ignore[import-not-found]
from torchvision.transforms.v2 import functional as F  # type: ignore[import-not-found]

# every functional torchvision 0.28 registers a Mask kernel for (``get_size`` and ``to_dtype`` aside)
GEOMETRY = ("affine", "center_crop", "crop", "elastic", "horizontal_flip", "pad", "perspective", "resize",
            "resized_crop", "rotate", "vertical_flip")


class PerObject(tv_tensors.Mask):
    """(K, ...) values of K objects on a canvas of (H, W): filtered with the boxes, unchanged by geometry."""

    canvas_size: tuple[int, int]

    @classmethod
    def _wrap(cls, tensor: torch.Tensor, *, canvas_size: Sequence[int]) -> Any:
        out = tensor.as_subclass(cls)
        out.canvas_size = (int(canvas_size[0]), int(canvas_size[1]))
        return out

    def __new__(cls, data: Any, *, canvas_size: Sequence[int]) -> Any:
        return cls._wrap(torch.as_tensor(data), canvas_size=canvas_size)

    @classmethod
    def wrap(cls, tensor: torch.Tensor, like: Any, **kwargs: Any) -> Any:
        """As ``like`` (torchvision's ``tv_tensors.wrap`` calls this: SanitizeBoundingBoxes' filtered rows)."""
        return cls._wrap(tensor, canvas_size=kwargs.get("canvas_size", like.canvas_size))

    @classmethod
    def _wrap_output(cls, output: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
        """``clone``, ``to`` and ``detach`` keep the class and the canvas (torch's ops otherwise give tensors)."""
        first = next((x for x in (*args, *(kwargs or {}).values()) if isinstance(x, PerObject)), None)
        if isinstance(output, torch.Tensor) and not isinstance(output, PerObject) and first is not None:
            return type(first)._wrap(output, canvas_size=first.canvas_size)
        return output

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        return self._make_repr(canvas_size=self.canvas_size)


class ObjectKeyPoints(PerObject):
    """(K, P, 3) x, y, visibility of K objects' points: moved as torchvision moves ``KeyPoints``."""


def _moved(functional: Callable[..., Any], name: str) -> Callable[..., Any]:
    """The kernel of ``functional`` for both classes: the points (or one point, for the canvas alone) through
    torchvision's ``KeyPoints`` kernel."""
    def kernel(inpt: PerObject, *args: Any, **kwargs: Any) -> PerObject:
        values = inpt.as_subclass(torch.Tensor)
        points = isinstance(inpt, ObjectKeyPoints)
        xy = values[..., :2].reshape(-1, 2).to(torch.float64) if points else torch.zeros((1, 2), dtype=torch.float64)
        moved = functional(tv_tensors.KeyPoints(xy, canvas_size=inpt.canvas_size), *args, **kwargs)
        canvas = moved.canvas_size
        if not points:
            return type(inpt)._wrap(values, canvas_size=canvas)
        new = moved.as_subclass(torch.Tensor).reshape(*values.shape[:-1], 2).clone()
        if name == "horizontal_flip":  # torchvision's W - 1 - x (pixel indices): the boxes' frame is W - x
            new[..., 0] += 1
        elif name == "vertical_flip":
            new[..., 1] += 1
        x, y, seen = new[..., 0], new[..., 1], values[..., 2] > 0
        inside = seen & (x >= 0) & (x <= canvas[1]) & (y >= 0) & (y <= canvas[0])
        out = torch.where(inside[..., None], torch.cat([new, values[..., 2:].to(new.dtype)], dim=-1), 0.0)
        return ObjectKeyPoints._wrap(out.to(values.dtype), canvas_size=canvas)
    return kernel


def _size(inpt: PerObject) -> list[int]:
    return list(inpt.canvas_size)


def _to_dtype(inpt: PerObject, dtype: torch.dtype = torch.float32, scale: bool = False) -> PerObject:
    return type(inpt)._wrap(inpt.as_subclass(torch.Tensor).to(dtype), canvas_size=inpt.canvas_size)


for _name in GEOMETRY:
    if hasattr(F, _name):
        F.register_kernel(getattr(F, _name), PerObject)(_moved(getattr(F, _name), _name))  # ObjectKeyPoints too
F.register_kernel(F.get_size, PerObject)(_size)
F.register_kernel(F.to_dtype, PerObject)(_to_dtype)
