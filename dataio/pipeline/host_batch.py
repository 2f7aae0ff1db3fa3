"""A batch on the host as the pass driver sees it: its samples' named fields and its bookkeeping.

A kind of sample is declared by the fields its source fills (as MosaicML
Streaming's columns and Megatron-Energon's sample types): images fill
``image`` (N, S, S, 3) uint8 and ``label``; text ``input_ids``,
``attention_mask``, ``labels``...; a pair adds ``input_ids`` to ``image``;
boxes and their masks are one ragged field, ``targets`` (a ``Rows``: several
rows per sample, dropped with it). The driver, the device copy,
``batch_transform`` and the position work on any set of them. The count is ``len(samples)``, never one field's length: a hook or a
source that returned a short field is caught against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from dataio.pipeline.stage_times import Lap


@dataclass
class HostBatch:
    """Named per-sample fields (first dimension ``len(samples)``), batch-level values, and the batch's place."""

    fields: dict[str, Any]  # per sample: numpy arrays, torch tensors or lists, in sample order
    samples: np.ndarray  # (N,) int64: the global ids (rows of the sample table, or of a text plan)
    repeated: np.ndarray  # (N,) bool: padding repeats that evaluation should drop
    units: int  # positions of the epoch's order the batch covers, counted before any sample is dropped
    key: Any = None  # augment.SeedKey: seeds the batch's device augmentation and batch_transform's generator
    shared: dict[str, Any] = field(default_factory=dict)  # batch-level, not per sample (packed rows' cu_seqlens)
    laps: tuple[Lap, ...] = ()  # the read tasks' stopwatches
    extra: dict[str, Any] = field(default_factory=dict)  # the source's own notes (packed text's pieces), not fields

    def __len__(self) -> int:
        return len(self.samples)

    def finished(self) -> float:
        """When its last read task finished (perf_counter seconds)."""
        return max((lap.finished for lap in self.laps), default=0.0)

    def keep(self, mask: np.ndarray) -> "HostBatch":
        """The batch without the samples where ``mask`` is False, in every per-sample field."""
        return replace(self, fields={name: take(value, mask) for name, value in self.fields.items()},
                       samples=self.samples[mask], repeated=self.repeated[mask])


@runtime_checkable
class Rows(Protocol):
    """A ragged per-sample field: each sample owns a run of rows (its boxes, their masks), so the field is not one
    array whose first dimension is the batch; it drops samples itself, rows and all."""

    def __len__(self) -> int:
        """The batch's samples."""

    def keep(self, mask: np.ndarray) -> "Rows":
        """Only the samples where ``mask`` (N,) bool is True, with their rows."""


def take(value: Any, mask: np.ndarray) -> Any:
    """The rows of one field where ``mask`` is True (a numpy array, a tensor, a list, a ragged ``Rows``, or None)."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return value[torch.from_numpy(mask).to(value.device)]
    if isinstance(value, np.ndarray):
        return value[mask]
    if isinstance(value, (list, tuple)):
        return [item for item, kept in zip(value, mask.tolist(), strict=True) if kept]
    if isinstance(value, Rows):
        return value.keep(mask)
    raise TypeError(f"a batch field is an array, a tensor, a list or ragged Rows, not {type(value).__name__}")

