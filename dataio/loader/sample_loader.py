"""``SampleLoader``: the skeleton with nothing of a kind's own, for a new kind of sample.

Give it any ``SampleSource`` read by samples (``pipeline.sample_source``) and it
yields each batch as a dict of the source's named fields on the device, plus
``sample_ids`` and ``repeated``: the ranks' shares and their agreement,
deterministic epochs, mid-epoch and elastic resume (``state_dict``), the error
policy, decode threads, the device copy and ``batch_transform`` come from the
skeleton. ``docs/architecture.md`` ("Adding a kind of sample") walks through one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dataio.augment.seeding import SeedKey, hook_seed
from dataio.formats.errors import ConfigError
from dataio.loader.loader_config import LoaderConfig
from dataio.loader.rebuilt_on_unpickle import record_arguments
from dataio.loader.sample_sharing import SampleSharing
from dataio.loader.source_loader import SourceLoader
from dataio.pipeline.device_stage import DeviceStage, FieldsFinish
from dataio.pipeline.hook_sizes import check_rows
from dataio.pipeline.host_batch import HostBatch
from dataio.pipeline.loader_stats import LoaderStats
from dataio.pipeline.sample_source import SampleSource
from dataio.pipeline.source_checks import check_rows as check_source_rows
from dataio.pipeline.stage_times import StageTimes


@dataclass(frozen=True, kw_only=True)
class SampleLoaderConfig(LoaderConfig):
    """The shared options, plus a batch size, read threads and a per-batch hook on the fields' dict."""

    batch_size: int = 32
    num_workers: int = 0  # read threads; 0: each batch read in the calling thread
    prefetch_batches: int = 1  # batches in flight per thread
    timeout: float = 0  # > 0: waiting longer for a batch raises
    batch_transform: Callable[[dict], dict] | None = None  # per batch dict, on the device, last

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, least in (("batch_size", 1), ("num_workers", 0), ("prefetch_batches", 1)):
            if getattr(self, name) < least:
                raise ValueError(f"{name} must be >= {least}, got {getattr(self, name)}")

    def batch_size_at(self, epoch: int) -> int:
        return self.batch_size


class SampleLoader(SampleSharing, SourceLoader):
    """``SampleLoader(source, batch_size=..., ...)``: dict batches of ``source``'s fields (``SampleLoaderConfig``)."""

    _key_type = SeedKey  # a source's random draws per batch: reproducible on any thread count and after a resume

    def __init__(self, source: SampleSource, config: SampleLoaderConfig | None = None, **options: Any) -> None:
        self.config = c = dataclasses.replace(config or SampleLoaderConfig(), **options)
        self.folder = getattr(source, "name", type(source).__name__)
        stats = LoaderStats(max_errors=c.max_errors, stages=StageTimes(profile=c.profile), fixed_threads=c.num_workers)
        self._start(source, stats, fingerprint=getattr(source, "fingerprint", lambda: "")(), threads=c.num_workers,
                    prefetch=c.prefetch_batches, timeout=c.timeout, num_workers=c.num_workers)
        self._stage = DeviceStage(self._copy.device, stats.stages, FieldsFinish(_checked, with_ids=True),
                                  pin=c.pin_memory, batch_transform=c.batch_transform,
                                  seed_of=lambda host: hook_seed(host.key))
        record_arguments(self, SampleLoader.__init__, (source, config), options)  # pickled as these (ddp_spawn)

    @property
    def batch_size(self) -> int:
        return self.config.batch_size

    def _sample_shards(self) -> np.ndarray | int:
        return getattr(self.source, "shard_of", len(self.source))

    def _move(self, host: HostBatch) -> dict[str, torch.Tensor] | None:
        if not len(host.samples):
            return None
        check_source_rows(self.source, host.fields, len(host.samples))  # a new kind's source: not taken on trust
        return self._stage(host)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        return self._iterate(lambda moved, host: moved)


def _checked(out: Any, rows: int) -> dict:
    """A ``batch_transform``'s dict, whose every field keeps the batch's rows (``hook_sizes``)."""
    if not isinstance(out, dict):
        raise ConfigError(f"{{0}} must return the batch dict, got {type(out).__name__}", "batch_transform")
    check_rows("batch_transform", {name: value for name, value in out.items() if hasattr(value, "shape")}, rows,
               "samples")
    return out
