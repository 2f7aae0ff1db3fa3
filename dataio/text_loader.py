"""``dataio.TextLoader``: batches of pre-tokenised text from memory-mapped Arrow shards.

Modes (``TextLoaderConfig.mode``):

- ``fixed``: ``batch_size`` random samples per batch, padded;
- ``bucket``: ``batch_size`` samples of similar length (sorted within
  shuffled windows; batch order shuffled);
- ``budget``: as bucket, but each batch takes as many rows as fit
  ``max_tokens`` (rows x padded length), so the batch size varies;
- ``pack``: documents concatenated into ``block_size`` rows with document
  boundaries (``cu_seqlens``, ``position_ids``), no padding but the tail.

Each epoch's plan is built globally and dealt to ranks (``dataio.text_batches``),
so every rank gets the same number of batches. Batches are dicts of int64
tensors (see ``dataio.text_collate``); ``state_dict`` resumes mid-epoch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from dataio import text_batches as plans
from dataio.epoch_position import EpochPosition, ResumableLoader
from dataio.text_collate import pack_rows, pad_rows
from dataio.token_shards import TokenShards


@dataclass(frozen=True, kw_only=True)
class TextLoaderConfig:
    """Every option of the text loader, validated on construction."""

    mode: Literal["fixed", "bucket", "budget", "pack"] = "budget"
    batch_size: int = 32  # rows per batch (fixed, bucket, pack)
    max_tokens: int = 16384  # budget: rows x padded length per batch
    block_size: int = 1024  # pack: tokens per row
    pad_multiple: int = 8
    window: int = 8192  # bucket/budget: samples sorted together
    shuffle: bool = True
    seed: int = 0
    drop_last: bool = False
    world_size: int = 1
    rank: int = 0
    device: str = "cpu"
    pin_memory: bool = False
    verify_checksums: bool = False

    def __post_init__(self) -> None:
        if self.mode not in ("fixed", "bucket", "budget", "pack"):
            raise ValueError(f"mode must be fixed|bucket|budget|pack, got {self.mode!r}")
        for name in ("batch_size", "max_tokens", "block_size", "pad_multiple", "window", "world_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} is not in 0..{self.world_size - 1}")


class TextLoader(ResumableLoader):
    """Iterate dict batches over a token shard folder: ``TextLoader(folder, mode="budget", max_tokens=...)``."""

    def __init__(self, source: str | Path, config: TextLoaderConfig | None = None, **options: Any) -> None:
        self.config = dataclasses.replace(config or TextLoaderConfig(), **options)
        self.shards = TokenShards(source, self.config.verify_checksums)
        if len(self.shards) == 0:
            raise ValueError(f"{source} holds no samples")
        self.position = EpochPosition(seed=self.config.seed, world_size=self.config.world_size)
        self._plan_cache: tuple[int, Any] | None = None
        self.padding_tokens = self.real_tokens = 0  # counters over everything yielded

    @property
    def pad_id(self) -> int:
        return self.shards.pad_id

    def plan(self, epoch: int | None = None):
        """This rank's plan for ``epoch``: a ``BatchPlan``, or ``(PackStream, BatchPlan)`` when packing."""
        epoch = self.epoch if epoch is None else epoch
        if self._plan_cache and self._plan_cache[0] == epoch:
            return self._plan_cache[1]
        c = self.config
        rng = plans.epoch_rng(c.seed, epoch) if c.shuffle else None
        lengths = self.shards.lengths
        if c.mode == "pack":
            result = plans.pack_plan(lengths, block_size=c.block_size, batch_size=c.batch_size, rng=rng,
                                     world_size=c.world_size, rank=c.rank, drop_last=c.drop_last)
        else:
            if c.mode == "fixed":
                full = plans.fixed_plan(len(lengths), c.batch_size, rng=rng, drop_last=c.drop_last)
            elif c.mode == "bucket":
                full = plans.bucket_plan(lengths, c.batch_size, window=c.window, rng=rng, drop_last=c.drop_last)
            else:
                full = plans.budget_plan(lengths, c.max_tokens, window=c.window, pad_multiple=c.pad_multiple, rng=rng)
            result = plans.deal(full, world_size=c.world_size, rank=c.rank, drop_last=c.drop_last)
        self._plan_cache = (epoch, result)
        return result

    def __len__(self) -> int:
        plan = self.plan()
        return len(plan[1] if isinstance(plan, tuple) else plan)

    def numpy_batch(self, index: int) -> dict[str, np.ndarray]:
        """Batch ``index`` of this rank's current epoch, as numpy arrays."""
        plan = self.plan()
        if isinstance(plan, tuple):
            stream, rows = plan
            return pack_rows(rows.batch(index), stream, self.shards.tokens, pad_id=self.pad_id)
        samples = plan.batch(index)
        batch = pad_rows([self.shards.tokens(int(s)) for s in samples], pad_id=self.pad_id,
                         pad_multiple=self.config.pad_multiple)
        batch["sample_ids"] = samples
        return batch

    def _to_device(self, batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        device = torch.device(self.config.device)
        out = {}
        for name, array in batch.items():
            tensor = torch.from_numpy(array)
            if device.type == "cuda" and self.config.pin_memory:
                tensor = tensor.pin_memory()
            out[name] = tensor.to(device, non_blocking=True)
        return out

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        count = len(self)
        for index in range(self.position.begin(), count):
            batch = self.numpy_batch(index)
            mask = batch["attention_mask"]
            real = int(mask.sum())
            self.real_tokens += real
            self.padding_tokens += mask.size - real
            self.position.advance()
            yield self._to_device(batch)
        self.position.end()
