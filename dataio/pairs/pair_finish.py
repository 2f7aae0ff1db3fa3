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
from dataio.pipeline.hook_sizes import checked_dict
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

    def checked(self, out: Any, rows: int, given: Any = None) -> dict:
        return checked_dict(out, rows, given=given)
