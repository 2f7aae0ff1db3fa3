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

import bisect
import dataclasses
import logging
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from dataio.formats.errors import ConfigError, SampleError
from dataio.formats.remote.storage import redact
from dataio.loading.dataloader_args import (Capabilities, check_sampler_size, constructor_defaults, dataloader_fields,
                                            given_options, keyword_checked)
from dataio.loading.error_policy import ErrorPolicy
from dataio.sampling.partition import DEFAULT_WINDOW
from dataio.loading.remote_options import retry_policy
from dataio.loading.device_copy import DeviceCopy, copy_arrays
from dataio.loading.exit_close import close_at_exit
from dataio.loading.loader_stats import LoaderStats, SourceCounts
from dataio.loading.stage_times import Lap, StageTimes
from dataio.sampling import partition
from dataio.sampling.epoch_position import EpochPosition, ResumableLoader
from dataio.sampling.epoch_sampler import EpochBatchSampler, EpochSampler
from dataio.sampling.mixture_options import mixture_sources, source_storage_options
from dataio.sampling.world import resolve_world
from dataio.text import batch_plans as plans
from dataio.text.batch_plans import BatchPlan
from dataio.text.collate import blank_piece, pack_rows, padded_rows, padded_width
from dataio.text.config import TextLoaderConfig
from dataio.text.local_copy import local_token_folder
from dataio.text.mixture_plans import TextMixture
from dataio.text.samples_view import TextSamples
from dataio.text.token_shards import TokenShards

log = logging.getLogger("dataio")
FIELDS = frozenset(f.name for f in dataclasses.fields(TextLoaderConfig))
FACE = Capabilities(name="TextLoader", threads=False)  # batches are built in the calling thread
DEFAULTS = {**constructor_defaults(TextLoaderConfig), "num_workers": None, "timeout": 0}


class TextLoader(ResumableLoader):
    """Iterate dict batches over a token shard folder: ``TextLoader(folder, mode="budget", max_tokens=...)``.

    Takes DataLoader's keywords too (``dataio.loading.dataloader_args``).
    """

    @keyword_checked
    def __init__(self, source: str | Path | Mapping[str, str | Path], config: TextLoaderConfig | None = None, *,
                 mode: Literal["fixed", "bucket", "budget", "pack"] = "budget",
                 batch_size: int = 32,
                 max_tokens: int = 16384,
                 block_size: int = 1024,
                 pad_multiple: int = 8,
                 window: int = 8192,
                 shuffle: bool = True,
                 shuffle_window: int = DEFAULT_WINDOW,
                 seed: int = 0,
                 drop_last: bool = False,
                 world_size: int | None = None,
                 rank: int | None = None,
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
        self.config = dataclasses.replace(base, **fields)
        self._copy_dirs: list[tempfile.TemporaryDirectory] = []  # remote sources' temporary copies
        self.mixture: TextMixture | None = None
        sources = mixture_sources(source, self.config.weights)
        if sources is not None:  # a mixture: {name: folder or URL}
            self.shards, fingerprint = self._open_mixture(sources)
        else:
            self.shards = self._token_shards(source, self.config.storage_options)
            fingerprint = self.shards.manifest.fingerprint()
        check_sampler_size(options.get("sampler"), len(self.shards), str(source))
        self.stats = LoaderStats(max_errors=self.config.max_errors, stages=StageTimes(profile=self.config.profile),
                                 sources=getattr(self, "_sources", {}))
        self._copy = DeviceCopy(self.config.device)
        if len(self.shards) == 0:
            raise ValueError(f"{source} holds no samples")
        self.world_size, self.rank = resolve_world(self.config.world_size, self.config.rank)
        self.position = EpochPosition(seed=self.config.seed, world_size=self.world_size, dataset=fingerprint)
        self._plan_cache: tuple[int, Any] | None = None
        self._dealt_cache: tuple[int, int, BatchPlan] | None = None
        self.padding_tokens = self.real_tokens = 0  # counters over everything yielded
        partition.check_world(len(self.global_plan(0)[1]), self.world_size, drop_last=self.config.drop_last,
                              unit="batches")
        log.info("TextLoader(%s): %d samples, mode %s, %d batches in epoch 0 over %d ranks%s",
                 ", ".join(self.mixture.names) if self.mixture else redact(str(source)), len(self.shards),
                 self.config.mode, len(self.global_plan(0)[1]), self.world_size,
                 f", a mixture of {len(self.mixture.names)} sources" if self.mixture else "")

    def _open_mixture(self, sources: Mapping[str, str | Path]) -> tuple[TokenShards, str]:
        """The sources' shards end to end, and the mixture plans; the fingerprint of both."""
        parts: dict[str, TokenShards] = {}
        for name, folder in sources.items():
            parts[str(name)] = self._token_shards(folder, source_storage_options(self.config.storage_options,
                                                                                 sources, name))
            if len(parts[str(name)]) == 0:
                raise ValueError(f"source {name!r} ({folder}) holds no samples")
        self.mixture = TextMixture(tuple(parts), [p.lengths for p in parts.values()],
                                   [p.shard_of for p in parts.values()], self.config)
        self._sources = SourceCounts(self.mixture.names)
        self._source_fingerprints = [p.manifest.fingerprint() for p in parts.values()]
        return TokenShards.concat(parts), self.mixture.fingerprint(self._source_fingerprints)

    def set_weights(self, weights: Any) -> None:
        """Blend a mixture by ``weights`` (as the constructor's) instead: on a fresh loader only, before its
        first pass or ``load_state_dict``. ``dataio train`` places a schedule given in fractions of the run once
        the loader knows an epoch's length in units; the sources stay open and each source's batches are kept."""
        if self.mixture is None:
            raise ConfigError("{0} needs a mixture: pass the sources as a dict {{name: folder or URL}}", "weights")
        p = self.position
        if self._live or p.loaded or p.epoch or p.consumed or p.yielded:
            raise ValueError("set_weights: the loader has begun (a pass, a set_epoch or a loaded state); set the "
                             "weights on a fresh loader")
        self.config = dataclasses.replace(self.config, weights=weights)
        self.mixture.reschedule(self.config)
        p.dataset = self.mixture.fingerprint(self._source_fingerprints)
        self._plan_cache = self._dealt_cache = None
        partition.check_world(len(self.global_plan(0)[1]), self.world_size, drop_last=self.config.drop_last,
                              unit="batches")

    def _token_shards(self, source: str | Path, storage_options: Mapping[str, Any] | None) -> TokenShards:
        """The token shards of ``source``; a URL's are copied locally first (``local_copy``), their sha256 checked
        once then, not again by ``verify_checksums``. ``storage_options``: this source's
        (``mixture_options.source_storage_options`` gives a mixture's local sources none)."""
        c = self.config
        folder, temporary, verified = local_token_folder(
            source, storage_options=storage_options, retry=retry_policy(c.retries, c.retry_backoff),
            cache_dir=c.cache_dir, timeout=c.remote_timeout)
        if temporary is not None:
            self._copy_dirs.append(temporary)
        return TokenShards(folder, c.verify_checksums and not verified)

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

    @property
    def batch_sampler(self) -> EpochBatchSampler:
        """This rank's sample ids per batch of the pass (as DataLoader's ``BatchSampler``, over ``sampler``)."""
        return EpochBatchSampler(self, self._batch_ids)

    def sample_ids(self) -> np.ndarray:
        """This rank's sample ids (block rows when packing) of the next (or current) pass, in batch order."""
        return self.plan().samples

    def _batch_ids(self) -> list[np.ndarray]:
        plan = self.plan()
        return [plan.batch(i) for i in range(len(plan))]

    def global_plan(self, epoch: int | None = None) -> tuple[plans.PackStream | None, BatchPlan]:
        """The epoch's batches over all ranks (and the token stream when packing); world-size independent."""
        epoch = self.epoch if epoch is None else epoch
        if self._plan_cache and self._plan_cache[0] == epoch:
            return self._plan_cache[1]
        if self.mixture is not None:
            self._plan_cache = (epoch, self.mixture.global_plan(epoch))
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

        Timed in ``stats.stages``: padded modes ``read`` (the batch gathered, padded, masked, labelled and
        checked in one pass, ``collate.padded_rows``); packing ``read`` (each sample's tokens, checked) and
        ``collate`` (the packing, reads excluded).
        """
        stream, _ = self.global_plan()
        plan = self.plan()
        rows = plan.batch(index)
        lap = self.stats.stages.lap()
        if stream is not None:
            batch = self._packed_batch(rows, stream, lap)
        else:
            batch = self._padded_batch(rows, lap)
        batch["repeated"] = np.full(len(batch["input_ids"]), bool(plan.repeated[index]))
        lap.items = len(batch["input_ids"])
        lap.flush()
        return batch

    def _count_sources(self, batch: dict[str, np.ndarray], rows: np.ndarray, real: int,
                       stream: plans.PackStream | None) -> None:
        """A mixture's per-source samples and tokens (``real``: the batch's) in ``stats.sources``. A bucket or
        budget batch is one source's: two scalar additions, ~1 us. Packed rows are counted by ``_packed_batch``
        from the document pieces it has found (finding them again cost ~20 us of a ~175 us batch)."""
        mixture = self.mixture
        if stream is not None:
            return
        if mixture.by_batches:
            samples = batch["sample_ids"]
            if len(samples):
                self.stats.sources.add_one(bisect.bisect_right(mixture.offset_list, int(samples[0])) - 1,
                                           len(samples), real)
            return
        self.stats.sources.add(*self._source_arrays(batch["sample_ids"], None))

    def _source_arrays(self, rows: np.ndarray, stream: plans.PackStream | None) -> tuple[np.ndarray, np.ndarray]:
        """(samples, tokens) of each source in ``rows``: sample ids, or packed rows' stream starts."""
        mixture, k = self.mixture, len(self.mixture.names)
        if stream is None:  # whole samples: counted with two bincounts, not per sample
            source = mixture.source_of(rows)
            return np.bincount(source, minlength=k), np.bincount(source, weights=self.shards.lengths[rows],
                                                                 minlength=k)
        return self._piece_counts(stream.pieces(rows))

    def _piece_counts(self, pieces: plans.Pieces) -> tuple[np.ndarray, np.ndarray]:
        """(samples, tokens) of each source in packed rows' document ``pieces``: each piece's tokens, and each
        document counted where it starts."""
        mixture, k = self.mixture, len(self.mixture.names)
        source = mixture.source_of(pieces.sample)
        return (np.bincount(source, weights=pieces.lo == 0, minlength=k),
                np.bincount(source, weights=pieces.hi - pieces.lo, minlength=k))

    def source_counts(self, start: int, stop: int, epoch: int | None = None) -> np.ndarray:
        """A mixture's samples and tokens of each source (int64 ``(sources, 2)``) in batches ``start .. stop - 1``
        of the epoch's plan over all ranks, the positions ``state_dict`` counts (clipped to the plan; a rank's
        padding repeats not counted). Samples are documents begun when packing. A pure function of the plan:
        the same whatever was read ahead, on any rank, after any resume."""
        if self.mixture is None:
            raise ValueError("source_counts: the loader is not a mixture")
        stream, full = self.global_plan(epoch)
        start, stop = min(max(start, 0), len(full)), min(max(stop, 0), len(full))
        rows = full.samples[full.offsets[start]:full.offsets[max(start, stop)]]
        samples, tokens = self._source_arrays(rows, stream)
        return np.stack([samples, tokens], axis=1).astype(np.int64)

    def mixture_passes(self) -> dict[str, int]:
        """A mixture's passes each source has finished, by the position of this pass (all ranks together)."""
        if self.mixture is None:
            return {}
        stream, full = self.global_plan()
        consumed = min(self.position.consumed_now(), len(full))  # batches of the epoch's plan
        if self.mixture.by_batches:
            units = consumed
        elif stream is None:
            units = int(full.offsets[consumed])  # samples
        else:  # documents begun in the rows read
            rows = full.offsets[consumed]
            units = int(np.searchsorted(stream.stream_offsets[:-1], rows * stream.block_size, side="left"))
        return {name: entry["passes"] for name, entry in self.mixture.plan.counts(self.epoch, units).items()}

    def _padded_batch(self, rows: np.ndarray, lap: Lap) -> dict[str, np.ndarray]:
        """Padded rows of the samples ``rows``: read, padded and checked as one batch (``collate.padded_rows``),
        the bad rows (an id past the vocabulary) handled by the error policy and dropped."""
        with lap("read"):
            batch, largest = padded_rows(self.shards.arrays, rows, self.config.pad_multiple, self.pad_id)
            bad = self.shards.past_vocabulary(rows, batch["input_ids"], largest)
        for _, error in bad:
            self.stats.handle(self.config.on_error, error)
        if bad:
            keep = np.ones(len(rows), dtype=bool)
            keep[[row for row, _ in bad]] = False
            rows = rows[keep]
            width = padded_width(batch["lengths"][keep], self.config.pad_multiple)
            batch = {name: array[keep][:, :width] if array.ndim == 2 else array[keep] for name, array in batch.items()}
        self.stats.samples_ok += len(rows)
        batch["sample_ids"] = np.asarray(rows, dtype=np.int64)
        return batch

    def _packed_batch(self, rows: np.ndarray, stream: plans.PackStream, lap: Lap) -> dict[str, np.ndarray]:
        """Packed rows starting at ``rows``: each document piece read and checked in one pass
        (``collate.pack_rows``); a piece with an id past the vocabulary is handled by the error policy and
        left as padding (masked, no labels, its boundaries kept)."""
        with lap("collate"):
            pieces = stream.pieces(rows)
        with lap("read"):
            batch, largest = pack_rows(pieces, len(rows), stream.block_size, self.shards.arrays, pad_id=self.pad_id)
        bad = np.flatnonzero(largest >= self.shards.vocab_size) if self.shards.vocab_size else ()
        for index in bad:
            error = self.shards.past_vocabulary_error(int(pieces.sample[index]), int(largest[index]))
            self.stats.handle(self.config.on_error, error)
            blank_piece(batch, pieces, int(index), self.pad_id)
        self.stats.samples_ok += len(pieces) - len(bad)
        if self.mixture is not None:
            self.stats.sources.add(*self._piece_counts(pieces))
        return batch

    def _move(self, batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """One batch on the device: one staging buffer and one copy on CUDA, zero-copy views on the CPU;
        then ``batch_transform``."""
        with self.stats.stages.range("copy", self._copy.device):
            if self._copy.stream is None:
                moved = {name: torch.from_numpy(array) for name, array in batch.items()}
            else:
                moved = copy_arrays(batch, self._copy.device, pin=self.config.pin_memory)
        if self.config.batch_transform is None:
            return moved
        with self.stats.stages.range("batch_transform", self._copy.device):
            out = self.config.batch_transform(moved)
        if not isinstance(out, dict):
            raise ConfigError(f"{{0}} must return the batch dict, got {type(out).__name__}", "batch_transform")
        return out

    def _numpy_batches(self) -> Iterator[tuple[dict[str, np.ndarray], int]]:
        """The pass's batches, each with the positions of the plan it covers: 1, plus the batches before it that
        the error policy emptied (counted, then skipped)."""
        self._follow_sampler_epoch()
        stream, full = self.global_plan()
        self.position.begin(len(full))
        plan = self.plan()
        covered = 0
        for index in range(len(plan)):
            batch = self.numpy_batch(index)
            mask = batch["attention_mask"]
            real = int(batch["lengths"].sum()) if "lengths" in batch else int(mask.sum())  # padded: from lengths
            if self.mixture is not None:
                self._count_sources(batch, plan.batch(index), real, stream)
            self.real_tokens += real
            self.padding_tokens += mask.size - real
            covered += 1
            if len(batch["input_ids"]):
                yield batch, covered
                covered = 0

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        """One pass; ``stats.stages`` records ``wait`` (the consumer's time in ``next()``) and ``pass``.

        A pass still suspended at interpreter exit is closed then (``loading.exit_close``); one started
        during another pass, or after ``close()``, is refused."""
        return close_at_exit(self._one_pass(self._pass()))

    def _pass(self) -> Iterator[dict[str, torch.Tensor]]:
        times = self.stats.stages
        times.begin(self.epoch)
        start = time.perf_counter()
        wait: Any = times.range("wait").__enter__()
        try:
            for moved, (_, covered) in self._copy(self._numpy_batches(), lambda item: self._move(item[0])):
                # counted as it is handed out, after the copy stage, which builds the next batch first on CUDA:
                # counted when built, a state_dict() taken while the consumer held batch k skipped batch k + 1
                self.position.advance(covered)
                wait, _ = None, wait.__exit__()
                yield moved
                wait = times.range("wait").__enter__()
        finally:
            if wait is not None:  # a profiler range is never left open, even when the pass raises
                wait.__exit__()
        times.add("pass", time.perf_counter() - start)
        self.position.end()

    def close(self) -> None:
        """Release the memory-mapped shards (as ``ImageLoader.close`` closes its files); iterating again raises."""
        self._closed = True
        self.shards.close()
        for copy in self._copy_dirs:
            copy.cleanup()
        self._copy_dirs = []

    def __enter__(self) -> "TextLoader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
