"""Copy host batches to the training device on a side CUDA stream (timm's ``PrefetchLoader``), for both loaders.

On CUDA, batch k+1 is copied (``non_blocking=True`` from pinned memory) and
finished on a side stream while the consumer uses batch k; the consumer's
stream then waits for the copy, and each tensor is recorded on it so the
caching allocator does not reuse its memory early. On the CPU nothing is
copied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import numpy as np
import torch

Batch = TypeVar("Batch")
Moved = TypeVar("Moved")

_ALIGN = 8  # bytes: every array's view in the staging buffer starts at a multiple of its item size


class DeviceCopy:
    """``copy(batches, move)`` yields ``(move(batch), batch)``, one batch ahead on a side stream on CUDA."""

    def __init__(self, device: str | torch.device) -> None:
        self.device = torch.device(device)
        self.stream = torch.cuda.Stream(device=self.device) if self.device.type == "cuda" else None

    def __call__(self, batches: Iterable[Batch], move: Callable[[Batch], Moved]) -> Iterator[tuple[Moved, Batch]]:
        if self.stream is None:
            for batch in batches:
                yield move(batch), batch
            return
        ready: tuple[Moved, Batch] | None = None
        for batch in batches:
            with torch.cuda.stream(self.stream):
                moved = move(batch)
            if ready is not None:
                yield ready
            consumer = torch.cuda.current_stream(self.device)
            consumer.wait_stream(self.stream)
            for tensor in _tensors(moved):
                tensor.record_stream(consumer)
            ready = (moved, batch)
        if ready is not None:
            yield ready


def copy_arrays(arrays: dict[str, np.ndarray], device: torch.device, *, pin: bool) -> dict[str, torch.Tensor]:
    """A batch's arrays on ``device`` through one host staging buffer (pinned with ``pin``) and one copy.

    A text batch is 5-8 small arrays; one staging buffer costs one pinned
    allocation and one transfer instead of one of each per array. The results
    are views of the one device buffer, with each array's dtype and shape.
    """
    sizes = [-(-a.nbytes // _ALIGN) * _ALIGN for a in arrays.values()]
    host = torch.empty(sum(sizes), dtype=torch.uint8, pin_memory=pin)
    staging = host.numpy()
    offset = 0
    for array, size in zip(arrays.values(), sizes, strict=True):
        staging[offset:offset + array.nbytes] = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        offset += size
    moved = host.to(device, non_blocking=pin)
    out, offset = {}, 0
    for (name, array), size in zip(arrays.items(), sizes, strict=True):
        dtype = torch.from_numpy(np.zeros(0, dtype=array.dtype)).dtype
        out[name] = moved[offset:offset + array.nbytes].view(dtype).view(array.shape)
        offset += size
    return out


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    """The tensors in a tensor, or a tuple, list or dict of them (nested)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)
