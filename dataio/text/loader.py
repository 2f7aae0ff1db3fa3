"""``dataio.TextLoader``: batches of pre-tokenised text from memory-mapped Arrow shards.

Modes (``TextLoaderConfig.mode``):

- ``fixed``: ``batch_size`` random samples per batch, padded;
- ``bucket``: ``batch_size`` samples of similar length (sorted within shuffled windows; batch order shuffled);
- ``budget``: as bucket, but each batch takes as many rows as fit ``max_tokens`` (rows x padded length);
- ``pack``: documents concatenated into ``block_size`` rows with document boundaries (``cu_seqlens``,
  ``position_ids``), no padding but the tail.

Each epoch's plan is built globally and dealt to ranks (``dataio.text.batch_plans``), so every rank gets the same
number of batches. Batches are dicts of int64 tensors (see ``dataio.text.collate``) plus ``repeated`` (bool per
row: padding repeats that evaluation should drop); ``state_dict`` resumes mid-epoch, on the same or another world
size. A façade over the loader skeleton (``dataio.loader.source_loader``): its source reads each batch inline
(``token_batches``), its data is opened by ``token_data``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from dataio.formats.errors import ConfigError
from dataio.formats.remote.storage import redact
from dataio.loader.dataloader_args import (Capabilities, check_sampler_size, constructor_defaults, dataloader_fields,
                                           given_options, keyword_checked)
from dataio.loader.source_loader import SourceLoader
from dataio.pipeline.device_stage import DeviceStage, FieldsFinish
from dataio.pipeline.error_policy import ErrorPolicy
from dataio.pipeline.hook_sizes import checked_text_batch
from dataio.pipeline.host_batch import HostBatch
from dataio.pipeline.loader_stats import LoaderStats, SourceCounts
from dataio.pipeline.pass_plan import PassPlan, batch_plan
from dataio.pipeline.stage_times import StageTimes
from dataio.sampling import partition
from dataio.sampling.partition import DEFAULT_WINDOW
from dataio.text import batch_plans as plans
from dataio.text.config import TextLoaderConfig
from dataio.text.gathered_rows import GatheredRows
from dataio.text.samples_view import TextSamples
from dataio.text.token_batches import TokenBatchSource
from dataio.text.token_data import TokenData
from dataio.text.token_facts import TokenFacts

log = logging.getLogger("dataio")
FIELDS = frozenset(f.name for f in dataclasses.fields(TextLoaderConfig))
FACE = Capabilities(name="TextLoader", threads=False, reads_indices=False)  # batches are built in the calling thread
DEFAULTS = {**constructor_defaults(TextLoaderConfig), "num_workers": None, "timeout": 0}


class TextLoader(GatheredRows, SourceLoader, TokenFacts):
    """Iterate dict batches over a token shard folder: ``TextLoader(folder, mode="budget", max_tokens=...)``.

    Takes DataLoader's keywords too (``dataio.loader.dataloader_args``).
    """

    config: TextLoaderConfig

    @keyword_checked
    def __init__(self, source: str | Path | Mapping[str, str | Path], config: TextLoaderConfig | None = None, *,
                 mode: Literal["fixed", "bucket", "budget", "pack"] = "budget",
                 batch_size: int = 32,
                 max_tokens: int = 16384,
                 block_size: int = 1024,
                 pad_multiple: int = 8,
                 ignore_index: int = -100,
                 window: int = 8192,
                 shuffle: bool | None = None,
                 shuffle_window: int = DEFAULT_WINDOW,
                 seed: int = 0,
                 drop_last: bool = False,
                 even_batches: bool = True,
                 world_size: int | None = None, rank: int | None = None, shard: bool | None = True,
                 device: str = "cpu",
                 pin_memory: bool = False,
                 batch_transform: Callable[[dict], dict] | None = None,
                 verify_checksums: bool = False,
                 on_error: ErrorPolicy | str = ErrorPolicy.RAISE,
                 max_errors: int | None = None,
                 storage_options: Mapping[str, Any] | None = None,
                 cache_dir: str | Path | None = None,
                 retries: int = 4,
                 retry_backoff: float = 0.2,
                 remote_timeout: float = 20.0,
                 profile: bool = False,
                 weights: Any = None,
                 epoch_length: int | None = None,
                 epoch_until: str | None = None,
                 sampler: Any = None,
                 batch_sampler: Any = None,
                 num_workers: int | None = None,
                 collate_fn: Any = None,
                 timeout: float = 0,
                 worker_init_fn: Any = None,
                 multiprocessing_context: Any = None,
                 generator: torch.Generator | None = None,
                 prefetch_factor: int | None = None,
                 persistent_workers: bool | None = None,
                 pin_memory_device: str = "",
                 in_order: bool | None = None) -> None:
        """Open the token shard folder (or URL; a dict of them is a mixture, with ``weights``); every keyword is a
        field of :class:`TextLoaderConfig` (documented there, one line each) or one of
        ``torch.utils.data.DataLoader``'s, honoured, mapped or refused in one line (``num_workers``,
        ``prefetch_factor`` and ``timeout`` are refused when set: batches are built in the calling thread).
        ``config=`` gives the fields at once; a keyword then replaces that field.
        """
        options = given_options(locals(), DEFAULTS)
        base = config or TextLoaderConfig()
        fields, self._follow = dataloader_fields(options, FIELDS, FACE, base)
        self.config = c = dataclasses.replace(base, **fields)
        self.data = TokenData.open(source, c)
        self.shards, self.mixture = self.data.shards, self.data.mixture
        self.folder = ", ".join(self.mixture.names) if self.mixture else redact(str(source))
        check_sampler_size(options.get("sampler"), len(self.shards), str(source))
        stats = LoaderStats(max_errors=c.max_errors, stages=StageTimes(profile=c.profile),
                            sources=SourceCounts(self.mixture.names) if self.mixture else {})
        self._global: tuple[int, Any] | None = None  # the epoch's plan over all ranks
        self.padding_tokens = self.real_tokens = 0  # counters over everything yielded
        source_ = TokenBatchSource(self.shards, stats.stages, pad_multiple=c.pad_multiple, ignore_index=c.ignore_index)
        self._start(source_, stats, fingerprint=self.data.fingerprint(), threads=0, inline=True)
        self._stage = DeviceStage(self._copy.device, stats.stages, FieldsFinish(checked_text_batch, with_ids=False),
                                  pin=c.pin_memory, batch_transform=c.batch_transform)
        log.info("TextLoader(%s): %d samples, mode %s, %d batches in epoch 0 over %d ranks%s", self.folder,
                 len(self.shards), c.mode, len(self.global_plan(0)[1]), self.world_size,
                 f", a mixture of {len(self.mixture.names)} sources" if self.mixture else "")

    @staticmethod
    def dropin_defaults(options: dict[str, Any], *, where: str, shuffles: bool) -> None:
        options.setdefault("mode", "fixed")  # what dataio.DataLoader gives: DataLoader's fixed-size batches

    def set_weights(self, weights: Any) -> None:
        """Blend a mixture by ``weights`` instead, on a fresh loader (``dataio train`` places a schedule given in
        fractions of the run once the loader knows an epoch's units); each source's batches are kept."""
        if self.mixture is None:
            raise ConfigError("{0} needs a mixture: pass the sources as a dict {{name: folder or URL}}", "weights")
        p = self.position
        if self._live or p.loaded or p.epoch or p.consumed or p.yielded:
            raise ValueError("set_weights: the loader has begun (a pass, a set_epoch or a loaded state); set the "
                             "weights on a fresh loader")
        self.config = dataclasses.replace(self.config, weights=weights)
        self._rebuilt_with(weights=weights)  # a pickled loader is rebuilt with these weights
        self.mixture.reschedule(self.config)
        p.dataset = self.data.fingerprint()
        self._global = self._plan_cache = None
        self._check_world()

    # -- DataLoader-compatible surface -------------------------------------------------
    @property
    def batch_size(self) -> int | None:
        """Rows per batch; None in budget mode, where it varies (as DataLoader's None: no fixed size)."""
        return None if self.config.mode == "budget" else self.config.batch_size

    @property
    def dataset(self) -> TextSamples:
        """The shards as a map-style data set: len, classes, ``dataset[i]`` -> token ids."""
        return TextSamples(self.shards)

    # -- the epoch's plan --------------------------------------------------------------------
    def global_plan(self, epoch: int | None = None) -> tuple[plans.PackStream | None, plans.BatchPlan]:
        """The epoch's batches over all ranks (and the token stream when packing); world-size independent."""
        epoch = self.epoch if epoch is None else epoch
        if self._global is None or self._global[0] != epoch:
            self._global = (epoch, self.mixture.global_plan(epoch) if self.mixture
                            else plans.epoch_plan(self.shards.lengths, self.shards.order_shard_of, self.config, epoch))
        return self._global[1]

    def plan(self) -> plans.BatchPlan:
        """This rank's batches in the next (or current) pass: the epoch, or its rest after a resume; unpadded
        under Lightning's predict (its ``UnrepeatedDistributedSampler``: each batch once, counts differ by one)."""
        self._follow_world()
        return plans.deal(self.global_plan()[1], world_size=self.world_size, rank=self.rank,
                          drop_last=self.config.drop_last, consumed=self.position.consumed,
                          pad=self.config.even_batches and not self._unpadded)

    def _make_plan(self) -> PassPlan:
        dealt = self.plan()
        return self._even_rows(batch_plan(dealt.samples, dealt.offsets, dealt.repeated,
                                          consumed=self.position.consumed, world_size=self.world_size))

    def _epoch_total(self) -> int:
        stream, full = self.global_plan()
        self.source.stream = stream  # pack mode: the rows' token stream
        return len(full)

    def _check_world(self) -> None:
        partition.check_world(len(self.global_plan(0)[1]), self.world_size, drop_last=self.config.drop_last,
                              unit="batches")

    def _samples_at(self, position: int) -> int:
        return plans.samples_at(self.global_plan()[1], position)

    def _position_of(self, samples: int, epoch: int) -> int:
        return plans.position_of(self.global_plan(epoch)[1], samples, epoch)

    # -- batches -----------------------------------------------------------------------------
    def numpy_batch(self, index: int) -> dict[str, np.ndarray]:
        """Batch ``index`` of this rank's pass as numpy arrays (bad samples per ``on_error``), read as the pass does."""
        self._epoch_total()
        return self._arrays(self.driver.read(self.pass_plan(), index, None))

    def _arrays(self, host: HostBatch) -> dict[str, np.ndarray]:
        return {**host.fields, **host.shared, "repeated": host.repeated}

    def _counted(self, host: HostBatch) -> None:
        lengths, mask = host.fields.get("lengths"), host.fields["attention_mask"]  # padded: the lengths' sum
        real = int(lengths.sum()) if lengths is not None else int(mask.sum())
        self.real_tokens, self.padding_tokens = self.real_tokens + real, self.padding_tokens + mask.size - real
        if self.mixture is not None:
            samples = host.fields.get("sample_ids", host.samples)
            self.mixture.count_batch(self.stats.sources, samples, self.shards.lengths, real, host.extra.get("pieces"))

    def _move(self, host: HostBatch) -> dict[str, torch.Tensor] | None:
        return self._stage(host)

    def _share_settings(self) -> dict[str, Any]:
        return self.config.share_settings()

    def _kind(self) -> str:
        return f"TextLoader/{self.config.mode}"

    # -- a mixture's counts ------------------------------------------------------------------
    def source_counts(self, start: int, stop: int, epoch: int | None = None) -> np.ndarray:
        """A mixture's samples and tokens of each source (int64 ``(sources, 2)``) in batches ``start .. stop - 1``
        of the epoch's plan over all ranks, the positions ``state_dict`` counts (clipped to the plan; a rank's
        padding repeats not counted). Samples are documents begun when packing. A pure function of the plan:
        the same whatever was read ahead, on any rank, after any resume."""
        if self.mixture is None:
            raise ValueError("source_counts: the loader is not a mixture")
        return self.mixture.source_counts(*self.global_plan(epoch), start, stop, self.shards.lengths)

    def mixture_passes(self) -> dict[str, int]:
        """A mixture's passes each source has finished, by the position of this pass (all ranks together)."""
        if self.mixture is None:
            return {}
        return self.mixture.passes(*self.global_plan(), self.position.consumed_now(), self.epoch)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        """One pass (``SourceLoader._pass``: timed, closed at exit, refused during another or after ``close()``)."""
        return self._iterate(lambda moved, host: moved)

    def close(self) -> None:
        super().close()  # and the memory-mapped shards and remote copies: iterating again raises
        self.data.close()
