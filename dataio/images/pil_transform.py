"""A ``ShardDataset`` transform that takes PIL images only (torchvision v1's ``ToTensor``) is given them, with a hint.

``ShardDataset(folder, transform)`` is the swap for ``ImageFolder(root, transform)``, whose transforms get PIL
images; a ``ShardDataset`` sample is a uint8 ``(3, H, W)`` tensor (what torchvision v2 takes), which v1's
``ToTensor`` refuses with a TypeError ("pic should be PIL Image or ndarray"). Rather than fail on the first
sample, a transform recognisably PIL-only (v1's ``ToTensor`` or ``PILToTensor``, alone or in a v1
``Compose``), or one that raises on the tensor and takes the same image as PIL, is given PIL images from then
on; the ``dataio`` logger says once per process to pass ``to_pil=True``. Any exception counts, not only v1's
TypeError: a script's own PIL transforms call PIL methods, which on a tensor raise AttributeError
(``convert``, ``crop``), RuntimeError (``Tensor.resize``) or ValueError (``ImageEnhance``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from PIL import Image

from dataio.formats.fallback_log import warn_once

V1_MODULE = "torchvision.transforms.transforms"  # where torchvision v1's transform classes live
PIL_ONLY = frozenset({"ToTensor", "PILToTensor"})  # v1 classes that refuse tensors


def pil_only(transform: Callable) -> bool:
    """Whether ``transform`` is torchvision v1's ``ToTensor``/``PILToTensor``, or a v1 ``Compose`` holding one."""
    kind = type(transform)
    if kind.__module__ != V1_MODULE:
        return False
    return kind.__name__ in PIL_ONLY or (kind.__name__ == "Compose" and any(
        pil_only(step) for step in getattr(transform, "transforms", ())))


def as_pil(image: torch.Tensor) -> Image.Image:
    """A uint8 ``(3, H, W)`` tensor as the RGB PIL image ``to_pil=True`` gives."""
    return Image.fromarray(image.permute(1, 2, 0).numpy())


def hint(transform: Callable, why: str, loader: bool = False) -> None:
    """The one line per process: what was seen, what is done, and ``to_pil=True`` (the loader's ``transform=``:
    that each crop goes to it as a PIL image and comes back as uint8)."""
    if loader:
        warn_once("loader-transform-to-pil", f"ImageLoader: transform= {type(transform).__name__} {why}: each crop "
                                             "is given to it as a PIL image and its result taken back as uint8")
        return
    warn_once("shard-dataset-to-pil", f"ShardDataset: the transform {type(transform).__name__} {why}, as "
                                      "ImageFolder's do: it is given PIL images; pass to_pil=True to say so")


def as_uint8(image: Image.Image) -> torch.Tensor:
    """A PIL image back as the loader's uint8 ``(3, H, W)`` tensor."""
    return torch.from_numpy(np.asarray(image.convert("RGB")).copy()).permute(2, 0, 1)


def transform_sample(transform: Callable, image: Any, pil_input: bool, loader: bool = False) -> tuple[Any, bool]:
    """``transform(image)``, and whether the transform takes PIL images (``pil_input``, learnt here when it
    raises on a uint8 tensor and takes the PIL image; otherwise the first error stands). ``loader``: the
    hint is the loader's (``ImageLoader(transform=)`` shares this detection with ``ShardDataset``)."""
    tensor = isinstance(image, torch.Tensor) and image.dtype == torch.uint8
    if pil_input and tensor:
        return transform(as_pil(image)), True
    try:
        return transform(image), pil_input
    except Exception as error:  # noqa: BLE001 - whatever a PIL method does on a tensor; re-raised unless PIL works
        if not tensor:
            raise
        try:
            out = transform(as_pil(image))
        except Exception:
            raise error from None
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]  # one line, whatever it raised
        hint(transform, f"takes PIL images, not uint8 tensors ({first_line[:200]})", loader)
        return out, True
