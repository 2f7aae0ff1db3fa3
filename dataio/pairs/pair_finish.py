"""A pair batch on the device: its ``image`` finished as a classification batch's images are, its other fields as
they were copied, as one dict.

The image goes through ``ImageFinish`` (normalisation, RandAugment or the device crop, channels_last) with no
label; the token ids and mask were copied with the sample ids and padding flags (one staging buffer on CUDA:
``pipeline.device_stage``); strings, keys and ``.json`` dicts stay lists. The dict: ``image``, the array fields
(``input_ids``, ``attention_mask``), ``sample_ids`` and ``repeated`` (``(N,)`` int64 and bool, so a validation
loop counts each sample once), then the list fields (``caption``, ``key``, ``json``).
"""

from __future__ import annotations

from typing import Any

import torch

from dataio.images.config import ImageLoaderConfig
from dataio.images.image_finish import CROP_FIELDS, ImageFinish
from dataio.formats.errors import ConfigError
from dataio.pipeline.hook_sizes import check_rows, checked_dict
from dataio.pipeline.host_batch import HostBatch


class PairFinish:
    """``finish(moved, host)``: the pair batch's dict (module docstring)."""

    stage = "augment"

    def __init__(self, config: ImageLoaderConfig, options: Any, source: Any) -> None:
        self.image = ImageFinish(config, normalized_on_host=source.host_normalize is not None)

    def fields(self, host: HostBatch) -> dict[str, Any]:
        return {**{name: value for name, value in host.fields.items() if name not in CROP_FIELDS},
                "sample_ids": host.samples, "repeated": host.repeated}

    def __call__(self, moved: dict[str, Any], host: HostBatch) -> dict[str, Any]:
        images, _ = self.image.images(moved.pop("image"), None, host)
        lists = {name: value for name, value in moved.items() if isinstance(value, list)}
        return {"image": images, **{name: value for name, value in moved.items() if isinstance(value, torch.Tensor)},
                **lists}

    def checked(self, out: Any, rows: int, given: Any = None) -> dict | tuple:
        """A ``batch_transform``'s dict, or open_clip's ``(images, texts)`` tuple of two tensors, rows kept."""
        if isinstance(out, tuple):
            if len(out) != 2 or not all(isinstance(part, torch.Tensor) for part in out):
                raise ConfigError("{0} may return the batch dict or a tuple of two tensors (images, input_ids), got "
                                  f"a tuple of {', '.join(type(part).__name__ for part in out)[:80]}",
                                  "batch_transform")
            check_rows("batch_transform", {"images": out[0], "input_ids": out[1]}, rows, "samples")
            return out
        return checked_dict(out, rows, given=given)
