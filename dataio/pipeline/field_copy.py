"""A batch's named fields on the training device, then the user's ``batch_transform``: for any kind of sample.

On CUDA every array goes through one staging buffer (pinned with ``pin``) and
one copy (``device_copy.copy_arrays``: a text batch is 5-8 small arrays, so
one transfer instead of one each); on the CPU the arrays are wrapped without a
copy. ``batch_transform(dict) -> dict`` runs last, on the device, and what it
returns is checked against the batch's rows (``hook_sizes``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from dataio.pipeline.device_copy import copy_arrays
from dataio.pipeline.stage_times import StageTimes

Check = Callable[[Any, int], dict]  # (what batch_transform returned, the batch's rows) -> the checked dict


class FieldCopy:
    """``copy(arrays)``: the dict of numpy ``arrays`` as tensors on ``device``, through ``batch_transform``."""

    def __init__(self, device: torch.device, times: StageTimes, *, pin: bool,
                 batch_transform: Callable[[dict], dict] | None, check: Check) -> None:
        self.device, self.times, self.pin = device, times, pin
        self.batch_transform, self.check = batch_transform, check

    def __call__(self, arrays: dict[str, np.ndarray], rows: int) -> dict[str, torch.Tensor]:
        with self.times.range("copy", self.device):
            if self.device.type != "cuda":
                moved = {name: torch.from_numpy(array) for name, array in arrays.items()}
            else:
                moved = copy_arrays(arrays, self.device, pin=self.pin)
        if self.batch_transform is None:
            return moved
        with self.times.range("batch_transform", self.device):
            return self.check(self.batch_transform(moved), rows)
