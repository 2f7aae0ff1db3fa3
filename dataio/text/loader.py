"""``dataio.TextLoader``: batches of pre-tokenised text from memory-mapped Arrow shards.

Modes (``TextLoaderConfig.mode``):

- ``fixed``: ``batch_size`` random samples per batch, padded;
- ``bucket``: ``batch_size`` samples of similar length (sorted within
  shuffled windows; batch order shuffled);
- ``budget``: as bucket, but each batch takes as many rows as fit
  ``max_tokens`` (rows x padded length), so the batch size varies;
- ``pack``: documents concatenated into ``block_size`` rows with document
  boundaries (``cu_seqlens``, ``position_ids``), no padding but the tail.

Each epoch's plan is built globally and dealt to ranks (``dataio.text.batch_plans``),
so every rank gets the same number of batches. Batches are dicts of int64
tensors (see ``dataio.text.collate``) plus ``repeated`` (bool per row:
padding repeats that evaluation should drop); ``state_dict`` resumes
mid-epoch, on the same or another world size.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dataio.formats.errors import SampleError
from dataio.formats.manifest import open_dataset
from dataio.formats.remote_copy import copy_dataset
from dataio.loading.dataloader_args import Capabilities, check_sampler_size, dataloader_fields
from dataio.loading.remote_options import retry_policy
from dataio.loading.device_copy import DeviceCopy, copy_arrays
from dataio.loading.loader_stats import LoaderStats
from dataio.loading.stage_times import Lap, StageTimes
from dataio.sampling import partition
from dataio.sampling.epoch_position import EpochPosition, ResumableLoader
from dataio.sampling.epoch_sampler import EpochSampler
from dataio.sampling.world import resolve_world
from dataio.text import batch_plans as plans
from dataio.text.batch_plans import BatchPlan
from dataio.text.collate import pack_rows, pad_rows
from dataio.text.config import TextLoaderConfig
from dataio.text.samples_view import TextSamples
from dataio.text.token_shards import TokenShards

FIELDS = frozenset(f.name for f in dataclasses.fields(TextLoaderConfig))
FACE = Capabilities(name="TextLoader", threads=False)  # batches are built in the calling thread


class TextLoader(ResumableLoader):
    """Iterate dict batches over a token shard folder: ``TextLoader(folder, mode="budget", max_tokens=...)``.

    Takes DataLoader's keywords too (``dataio.loading.dataloader_args``).
    """

    def __init__(self, source: str | Path, config: TextLoaderConfig | None = None, **options: Any) -> None:
        base = config or TextLoaderConfig()
        fields, self._follow = dataloader_fields(options, FIELDS, FACE, base)
        self.config = dataclasses.replace(base, **fields)
        self._copy_dir: tempfile.TemporaryDirectory | None = None
        folder, verified = self._local_folder(source)
        self.shards = TokenShards(folder, self.config.verify_checksums and not verified)
        check_sampler_size(options.get("sampler"), len(self.shards), str(source))
        self.stats = LoaderStats(max_errors=self.config.max_errors, stages=StageTimes(profile=self.config.profile))
        self._copy = DeviceCopy(self.config.device)
        if len(self.shards) == 0:
            raise ValueError(f"{source} holds no samples")
        self.world_size, self.rank = resolve_world(self.config.world_size, self.config.rank)
        self.position = EpochPosition(seed=self.config.seed, world_size=self.world_size,
                                      dataset=self.shards.manifest.fingerprint())
        self._plan_cache: tuple[int, Any] | None = None
        self._dealt_cache: tuple[int, int, BatchPlan] | None = None
        self.padding_tokens = self.real_tokens = 0  # counters over everything yielded
        partition.check_world(len(self.global_plan(0)[1]), self.world_size, drop_last=self.config.drop_last,
                              unit="batches")

    def _local_folder(self, source: str | Path) -> tuple[str | Path, bool]:
        """``source`` itself when local; for a URL, a local copy of its shards whose sha256 were all checked
        (see ``dataio.formats.remote_copy``): Arrow token shards are memory-mapped, not range-read.
        Also whether the shards were checked."""
        c = self.config
        location, manifest = open_dataset(source, c.storage_options, retry_policy(c.retries, c.retry_backoff),
                                          c.remote_timeout)
        if not location.remote:
            return source, False
        if c.cache_dir is not None:
            folder = Path(c.cache_dir) / f"{location.cache_key()}-{manifest.fingerprint()}"
        else:
            self._copy_dir = tempfile.TemporaryDirectory(prefix="dataio-text-")
            folder = Path(self._copy_dir.name)
        copy_dataset(location, manifest, folder, retry_policy(c.retries, c.retry_backoff))
        return folder, True

    @property
    def pad_id(self) -> int:
        return self.shards.pad_id

    # -- DataLoader-compatible surface -------------------------------------------------
    @property
    def batch_size(self) -> int | None:
        """Rows per batch; None in budget mode, where it varies (as DataLoader's None: no fixed size)."""
        return None if self.config.mode == "budget" else self.config.batch_size

    @property
    def drop_last(self) -> bool:
        return self.config.drop_last

    @property
    def num_workers(self) -> int:
        """0: batches are built in the calling thread."""
        return 0

    @property
    def pin_memory(self) -> bool:
        return self.config.pin_memory

    @property
    def dataset(self) -> TextSamples:
        """The shards as a map-style data set: len, classes, ``dataset[i]`` -> token ids."""
        return TextSamples(self.shards)

    @property
    def sampler(self) -> EpochSampler:
        """``set_epoch``, ``len`` and this rank's sample ids of the pass (as a ``DistributedSampler``)."""
        return EpochSampler(self)

    def sample_ids(self) -> np.ndarray:
        """This rank's sample ids (block rows when packing) of the next (or current) pass, in batch order."""
        return self.plan().samples

    def global_plan(self, epoch: int | None = None) -> tuple[plans.PackStream | None, BatchPlan]:
        """The epoch's batches over all ranks (and the token stream when packing); world-size independent."""
        epoch = self.epoch if epoch is None else epoch
        if self._plan_cache and self._plan_cache[0] == epoch:
            return self._plan_cache[1]
        c = self.config
        rng = plans.epoch_rng(c.seed, epoch) if c.shuffle else None
        lengths = self.shards.lengths
        order = partition.epoch_order(self.shards.shard_of, seed=c.seed, epoch=epoch, shuffle=c.shuffle,
                                      window=c.shuffle_window)
        stream = None
        if c.mode == "pack":
            stream, full = plans.pack_plan(lengths, block_size=c.block_size, batch_size=c.batch_size, rng=rng,
                                           drop_last=c.drop_last, order=order)
        elif c.mode == "fixed":
            full = plans.fixed_plan(len(lengths), c.batch_size, rng=rng, drop_last=c.drop_last, order=order)
        elif c.mode == "bucket":
            full = plans.bucket_plan(lengths, c.batch_size, window=c.window, rng=rng, drop_last=c.drop_last,
                                     order=order)
        else:
            full = plans.budget_plan(lengths, c.max_tokens, window=c.window, pad_multiple=c.pad_multiple, rng=rng,
                                     order=order)
        self._plan_cache = (epoch, (stream, full))
        return stream, full

    def plan(self) -> BatchPlan:
        """This rank's batches in the next (or current) pass: the epoch, or its rest after a resume."""
        key = (self.epoch, self.position.consumed)
        if self._dealt_cache is None or self._dealt_cache[:2] != key:
            full = self.global_plan()[1]
            dealt = plans.deal(full, world_size=self.world_size, rank=self.rank, drop_last=self.config.drop_last,
                               consumed=self.position.consumed)
            self._dealt_cache = (*key, dealt)
        return self._dealt_cache[2]

    def __len__(self) -> int:
        """Batches of the epoch on this rank (as DataLoader's): this pass's, plus those yielded before a resume."""
        return self.position.before + len(self.plan())

    def _samples_at(self, position: int) -> int:
        """Samples (rows; block rows when packing) in the first ``position`` batches of the epoch's plan."""
        return int(self.global_plan()[1].offsets[position])

    def _position_of(self, samples: int, epoch: int) -> int:
        offsets = self.global_plan(epoch)[1].offsets
        position = int(np.searchsorted(offsets, samples))
        if position >= len(offsets) or offsets[position] != samples:
            raise ValueError(f"samples_consumed={samples} is not at a batch boundary of epoch {epoch}'s plan: "
                             "was the state saved with other batching options?")
        return position

    def numpy_batch(self, index: int) -> dict[str, np.ndarray]:
        """Batch ``index`` of this rank's current pass, as numpy arrays (bad samples per ``on_error``).

        Timed in ``stats.stages``: ``read`` (each sample's tokens from its
        shard, checked) and ``collate`` (padding or packing, reads excluded).
        """
        stream, _ = self.global_plan()
        plan = self.plan()
        rows = plan.batch(index)
        lap = self.stats.stages.lap()
        with lap("collate"):
            if stream is not None:
                batch = pack_rows(rows, stream, lambda sample: self._checked_tokens(sample, lap), pad_id=self.pad_id)
            else:
                tokens = [self._checked_tokens(int(s), lap) for s in rows]
                rows = np.array([s for s, t in zip(rows.tolist(), tokens) if t is not None], dtype=np.int64)
                batch = pad_rows([t for t in tokens if t is not None], pad_id=self.pad_id,
                                 pad_multiple=self.config.pad_multiple)
                batch["sample_ids"] = rows
            batch["repeated"] = np.full(len(batch["input_ids"]), bool(plan.repeated[index]))
        lap.items = len(batch["input_ids"])
        lap.flush()
        return batch

    def _checked_tokens(self, sample: int, lap: Lap) -> np.ndarray | None:
        """Sample ``sample``'s token ids, or None when the error policy drops it (``raise`` raises)."""
        try:
            with lap("read"):
                tokens = self.shards.checked_tokens(sample)
        except SampleError as error:
            self.stats.handle(self.config.on_error, error)
            return None
        self.stats.samples_ok += 1
        return tokens

    def _move(self, batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """One batch on the device: one staging buffer and one copy on CUDA, zero-copy views on the CPU."""
        with self.stats.stages.range("copy", self._copy.device):
            if self._copy.stream is None:
                return {name: torch.from_numpy(array) for name, array in batch.items()}
            return copy_arrays(batch, self._copy.device, pin=self.config.pin_memory)

    def _numpy_batches(self) -> Iterator[dict[str, np.ndarray]]:
        self._follow_sampler_epoch()
        self.position.begin(len(self.global_plan()[1]))
        for index in range(len(self.plan())):
            batch = self.numpy_batch(index)
            mask = batch["attention_mask"]
            real = int(mask.sum())
            self.real_tokens += real
            self.padding_tokens += mask.size - real
            self.position.advance(1)  # before the yield: state_dict() then covers this batch
            if len(batch["input_ids"]):  # every row dropped by the error policy: counted, then skipped
                yield batch
        self.position.end()

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        """One pass; ``stats.stages`` records ``wait`` (the consumer's time in ``next()``) and ``pass``."""
        times = self.stats.stages
        times.begin(self.epoch)
        start = time.perf_counter()
        wait: Any = times.range("wait").__enter__()
        try:
            for moved, _ in self._copy(self._numpy_batches(), self._move):
                wait, _ = None, wait.__exit__()
                yield moved
                wait = times.range("wait").__enter__()
        finally:
            if wait is not None:  # a profiler range is never left open, even when the pass raises
                wait.__exit__()
        times.add("pass", time.perf_counter() - start)

    def close(self) -> None:
        """Release the memory-mapped shards (as ``ImageLoader.close`` closes its files); iterating again raises."""
        self.shards.close()
        if self._copy_dir is not None:
            self._copy_dir.cleanup()
            self._copy_dir = None

    def __enter__(self) -> "TextLoader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
