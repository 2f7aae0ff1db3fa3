"""One device stage for every kind of sample: a batch's fields copied to the training device, the kind's finish,
then the user's ``batch_transform``, called once.

- **Copy.** Tensors (images, in pinned or pooled host memory) move with ``non_blocking=True``; numpy arrays go
  through one staging buffer on CUDA (``device_copy.copy_arrays``: a text batch is 5-8 small arrays, so one
  transfer instead of one each) and are wrapped without a copy on the CPU; lists (captions, keys) and row
  objects (``host_batch.Rows``: boxes and masks) pass as they are, for the finish. The fields a finish reads on
  the host (crop boxes drawn there) are left out by its ``fields``, and the sample ids and padding flags of a
  dict batch travel in the same copy, as ``sample_ids`` and ``repeated``.
- **Finish.** The kind's (``dataio.formats.kinds``): classification normalises and augments its images and
  yields ``(images, labels)``; pairs, boxes and views yield dicts; text yields its fields as they are.
- **Hook.** ``batch_transform`` gets what the finish yields (``(images, labels)`` as two arguments, a dict as
  one), with a generator on the device seeded from the batch's key when it takes a ``generator`` (its draws are
  then the same on every run and after a resume), and the finish checks what it returns (``hook_sizes``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch

from dataio.pipeline.device_copy import copy_arrays
from dataio.pipeline.host_batch import HostBatch
from dataio.pipeline.stage_times import StageTimes


class Finish(Protocol):
    """What a kind does to its copied fields: the last step before the user's hook."""

    stage: str | None  # the stage it is timed as ("augment"), or None for a finish that does nothing timed

    def fields(self, host: HostBatch) -> dict[str, Any]:
        """The fields to copy (those the finish reads on the host stay out)."""

    def __call__(self, moved: dict[str, Any], host: HostBatch) -> Any:
        """The batch as the loader yields it, from its fields on the device."""

    def checked(self, out: Any, rows: int, given: Any) -> Any:
        """What ``batch_transform`` returned (given ``given``), if it is a batch of this kind with ``rows`` rows;
        else ConfigError."""


class FieldsFinish:
    """The finish of a kind whose batch is its fields as they are (text, ``SampleLoader``'s sources): a dict, with
    the batch-level values (``shared``), the sample ids (``with_ids``) and the padding flags."""

    stage = None

    def __init__(self, check: Callable[[Any, int], dict], *, with_ids: bool) -> None:
        self.check, self.with_ids = check, with_ids

    def fields(self, host: HostBatch) -> dict[str, Any]:
        ids = {"sample_ids": host.samples} if self.with_ids else {}
        return {**host.fields, **host.shared, **ids, "repeated": host.repeated}

    def __call__(self, moved: dict[str, Any], host: HostBatch) -> dict[str, Any]:
        return moved

    def checked(self, out: Any, rows: int, given: Any) -> dict:
        return self.check(out, rows)


def takes_generator(fn: Callable) -> bool:
    """Whether ``fn`` accepts a ``generator=`` keyword (then it gets one seeded for each batch)."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    param = parameters.get("generator")
    return param is not None and param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY)


class DeviceStage:
    """``stage(host)``: the kind's batch on ``device`` (None for a batch the error policy emptied)."""

    def __init__(self, device: torch.device | str, times: StageTimes, finish: Finish, *, pin: bool,
                 batch_transform: Callable[..., Any] | None = None,
                 seed_of: Callable[[HostBatch], int] | None = None) -> None:
        self.device, self.times, self.finish, self.pin = torch.device(device), times, finish, pin
        self.batch_transform = batch_transform
        seeded = batch_transform is not None and seed_of is not None and takes_generator(batch_transform)
        self.seed_of = seed_of if seeded else None
        self._generator = torch.Generator(device=self.device) if seeded else None

    def copy(self, fields: dict[str, Any]) -> dict[str, Any]:
        """The fields on the device: tensors moved, arrays in one copy (CUDA) or wrapped (CPU), others as they are."""
        arrays = {name: value for name, value in fields.items() if isinstance(value, np.ndarray)}
        if self.device.type != "cuda":
            moved = {name: torch.from_numpy(array) for name, array in arrays.items()}
        else:
            moved = copy_arrays(arrays, self.device, pin=self.pin) if arrays else {}
        return {name: moved[name] if name in moved else
                value.to(self.device, non_blocking=True) if isinstance(value, torch.Tensor) else value
                for name, value in fields.items()}

    def __call__(self, host: HostBatch) -> Any:
        rows = len(host)
        if not rows:  # every sample failed under skip: counted, then dropped
            return None
        finish = self.finish
        with self.times.range("copy", self.device):
            moved = self.copy(finish.fields(host))
        if finish.stage is None:
            out = finish(moved, host)
        else:
            with self.times.range(finish.stage, self.device):
                out = finish(moved, host)
        if self.batch_transform is None:
            return out
        with self.times.range("batch_transform", self.device):
            return finish.checked(self._hook(out, host), rows, out)

    def _hook(self, out: Any, host: HostBatch) -> Any:
        """``batch_transform`` on the finished batch: ``(images, labels)`` as two arguments, a dict as one."""
        args = tuple(out) if isinstance(out, tuple) else (out,)
        if self._generator is None or self.seed_of is None:
            return self.batch_transform(*args)
        self._generator.manual_seed(self.seed_of(host))
        return self.batch_transform(*args, generator=self._generator)
