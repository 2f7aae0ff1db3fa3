"""A detection item's targets as torchvision's ``tv_tensors``, so its v2 transforms move them with the image.

torchvision's v2 transforms (``RandomHorizontalFlip``, ``RandomIoUCrop``, ``Resize``) move a dict's boxes and masks
only when they are ``tv_tensors.BoundingBoxes`` (with their format and canvas size) and ``tv_tensors.Mask``: plain
tensors pass through unchanged (the image flipped, its boxes not), and ``RandomIoUCrop`` refuses a sample without
boxes. Per-object fields (``iscrowd``, ``keypoints``) are ``tv_per_object``'s tensors, which v2 moves and
``SanitizeBoundingBoxes`` filters with the boxes (a plain tensor kept the rows of dropped boxes). torchvision is
optional and its import can fail in many ways (a compiled ops library that does not match torch raises at
import): it is imported on first use, once, and any exception means "not there" (plain tensors).
"""

from __future__ import annotations

from typing import Any

_found: dict[str, Any] = {}  # "tv_tensors", "per_object": the modules, or None where torchvision does not import


def tv_tensors() -> Any:
    """torchvision's ``tv_tensors`` module, or None where torchvision does not import."""
    if "tv_tensors" not in _found:
        try:
            from torchvision import tv_tensors as module  # noqa: PLC0415 (lazy: optional, imported on first use)
            from dataio.detection import tv_per_object as per_object  # noqa: PLC0415 (imports torchvision)
        except Exception:  # noqa: BLE001 (any failure at import: no torchvision)
            module = per_object = None
        _found["tv_tensors"], _found["per_object"] = module, per_object
    return _found["tv_tensors"]


def as_tv_tensors(sample: dict, height: int, width: int) -> dict:
    """``sample`` with ``boxes`` as ``BoundingBoxes(format="XYXY", canvas_size=(height, width))``, ``masks`` as
    ``Mask``, ``iscrowd`` and ``keypoints`` as ``tv_per_object``'s where torchvision imports; unchanged where it
    does not."""
    module = tv_tensors()
    if module is None:
        return sample
    per_object = _found["per_object"]
    sample["boxes"] = module.BoundingBoxes(sample["boxes"], format="XYXY", canvas_size=(height, width))
    if "masks" in sample:
        sample["masks"] = module.Mask(sample["masks"])
    sample["iscrowd"] = per_object.PerObject(sample["iscrowd"], canvas_size=(height, width))
    if "keypoints" in sample:
        sample["keypoints"] = per_object.ObjectKeyPoints(sample["keypoints"], canvas_size=(height, width))
    return sample
