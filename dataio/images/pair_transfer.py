"""A pair batch on the device: its ``image`` finished as a classification batch's images are, its other fields
copied, then the user's ``batch_transform(dict) -> dict``.

The image goes through the loader's ``DeviceTransfer`` (the copy on a side stream, normalisation,
RandAugment or the device crop, channels_last), with no label to carry; the token ids and mask as
``FieldCopy`` moves fields (one staging buffer on CUDA); strings, keys and ``.json`` dicts stay lists. The dict also
holds ``sample_ids`` and ``repeated`` (``(N,)`` int64 and bool), as ``SampleLoader``'s do, so a
validation loop can count each sample once.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from dataio.formats.errors import ConfigError
from dataio.images.config import ImageLoaderConfig
from dataio.images.device_transfer import DeviceTransfer, device_stage
from dataio.pipeline.device_copy import copy_arrays
from dataio.pipeline.hook_sizes import check_rows
from dataio.pipeline.host_batch import HostBatch
from dataio.pipeline.stage_times import StageTimes


def _checked(out: Any, rows: int) -> dict:
    if not isinstance(out, dict):
        raise ConfigError(f"{{0}} must return the batch dict, got {type(out).__name__}", "batch_transform")
    check_rows("batch_transform", {name: value for name, value in out.items() if hasattr(value, "shape")}, rows,
               "samples")
    return out


class PairTransfer:
    """``transfer(host)``: the pair batch's dict on the device (None for a batch the error policy emptied)."""

    def __init__(self, config: ImageLoaderConfig, times: StageTimes, *, normalized_on_host: bool = False) -> None:
        # the image stage without the hook: batch_transform runs on the whole dict, after it
        self.images: DeviceTransfer = device_stage(dataclasses.replace(config, batch_transform=None), times,
                                                   normalized_on_host=normalized_on_host)
        self.device, self.times = self.images.device, times
        self.pin = config.pin_memory and torch.cuda.is_available()
        self.batch_transform = config.batch_transform

    def __call__(self, batch: HostBatch) -> dict[str, Any] | None:
        rows = len(batch.samples)
        if not rows:
            return None
        host = batch.fields
        arrays = {name: value for name, value in host.items()
                  if isinstance(value, np.ndarray) and name not in ("crop_boxes", "crop_flips")}
        arrays.update(sample_ids=batch.samples, repeated=batch.repeated)
        with self.times.range("copy", self.device):
            images = host["image"].to(self.device, non_blocking=True)
            if self.device.type != "cuda":
                moved = {name: torch.from_numpy(array) for name, array in arrays.items()}
            else:
                moved = copy_arrays(arrays, self.device, pin=self.pin)
        with self.times.range("augment", self.device):  # no labels: a placeholder the chain passes through
            images, _ = self.images._finish(images, torch.zeros(rows, dtype=torch.int64, device=self.device), batch)
        out = {"image": images, **moved, **{name: value for name, value in host.items() if isinstance(value, list)}}
        if self.batch_transform is None:
            return out
        with self.times.range("batch_transform", self.device):
            return _checked(self.batch_transform(out), rows)
