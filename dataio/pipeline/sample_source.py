"""The seam between a kind of data set and the pass driver: one object reads a batch of sample ids into named
host fields, and names its failures.

A source knows its files and its decoding (images: reads, checksums, remote ranges,
region decode and splicing, DALI; text: padded and packed token rows); the
driver knows threads, prefetch, the error policy, timing and the device. A new
kind of sample is a new source: ``tests/pipeline/array_source.py`` is one in
under 100 lines. Everything a source reads is data: nothing is unpickled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from dataio.formats.errors import SampleError
from dataio.pipeline.host_batch import HostBatch
from dataio.pipeline.pass_plan import PassPlan
from dataio.pipeline.stage_times import Lap

# A read task returns the batch positions it could not fill, each with the error naming the sample.
Failures = list[tuple[int, SampleError]]
ReadTask = Callable[[], Failures]


@dataclass
class BatchStart:
    """A batch's fields, allocated (or already filled), and the tasks that fill them; the driver runs each task
    on a decode thread (or inline) and drops the samples they report."""

    fields: dict[str, Any]
    tasks: Sequence[ReadTask] = ()
    shared: dict[str, Any] = field(default_factory=dict)
    laps: tuple[Lap, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)  # the source's notes (its tasks may fill them), kept out


class SampleSource(Protocol):
    """One opened data set of one kind of sample."""

    def __len__(self) -> int:
        """Samples in the data set (rows of its sample table)."""

    def begin_pass(self, plan: PassPlan) -> None:
        """A pass over ``plan`` begins (a remote source starts fetching ahead)."""

    def end_pass(self) -> None:
        """The pass ended, or was left: let go of what it started."""

    def start_batch(self, index: int, ids: np.ndarray, key: Any) -> BatchStart:
        """Plan batch ``index`` of the pass, the samples ``ids`` (seeded by ``key``, an ``augment.SeedKey``);
        cheap, on the calling thread: the reading and decoding go into the returned tasks."""

    def without(self, batch: HostBatch, positions: list[int]) -> HostBatch:
        """``batch`` without the samples at ``positions`` (failed, and counted by the error policy)."""

    def close(self) -> None:
        """Release files and memory maps."""


def drop_samples(batch: HostBatch, positions: list[int]) -> HostBatch:
    """The usual ``without``: the failed samples removed from every field."""
    keep = np.ones(len(batch), dtype=bool)
    keep[positions] = False
    return batch.keep(keep)
