"""The batches of a text mixture's epoch: ``MixturePlan``'s blend, in each batching mode.

- ``fixed`` and ``pack`` blend samples: the epoch's order is the blend of the
  sources' shuffled passes (``MixturePlan.order``), cut into batches, or
  concatenated into the packed token stream (rows then mix documents of several
  sources; ``cu_seqlens`` and the mask mark every document boundary, as always).
  Shares are exact to one sample at every prefix.
- ``bucket`` and ``budget`` blend *batches*: each pass of a source is batched on
  its own (similar lengths together, in the source's own windows), and the blend
  picks whose next batch comes next. Sorting by length across sources would move
  samples across the blend and lose its exactness; batch by batch, the shares stay
  within one batch (a token budget's worth of tokens) of the schedule at every
  prefix. The schedule's positions then count batches.

Every array is a pure function of (sources, options, seed, epoch), world-size
independent, dealt to ranks by ``batch_plans.deal`` as for one source.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import zlib

import numpy as np

from dataio.mixtures.mixture_plan import EpochRule, MixturePlan
from dataio.mixtures.mixture_options import check_names, epoch_rule
from dataio.pipeline.loader_stats import SourceCounts
from dataio.text import batch_plans as plans
from dataio.text.batch_plans import BatchPlan, PackStream
from dataio.text.config import TextLoaderConfig

BATCH_UNITS = ("bucket", "budget")
_PASS_CACHE = 64  # per-source pass plans kept (a small source may run many passes per epoch)


class TextMixture:
    """A mixture's epoch plans for ``config`` over sources laid end to end (``offsets`` into the samples)."""

    def __init__(self, names: tuple[str, ...], lengths: list[np.ndarray], shards: list[np.ndarray],
                 config: TextLoaderConfig) -> None:
        self.names, self.lengths, self.config = names, lengths, config
        self.offsets = np.concatenate([[0], np.cumsum([len(x) for x in lengths])[:-1]]).astype(np.int64)
        self.offset_list = self.offsets.tolist()  # for bisect: a source per batch in 0.3 us, not 1.5
        self.all_lengths = np.concatenate(lengths)
        self.by_batches = config.mode in BATCH_UNITS
        self.shards = shards
        self._pass_plans: dict[tuple[int, int], BatchPlan] = {}
        self.plan = self._mixture(EpochRule(samples=1))  # the passes' orders, which the default rule counts
        self.plan = self._mixture(self._rule())

    def _mixture(self, rule: EpochRule) -> MixturePlan:
        c, names = self.config, self.names
        schedule = c.weights
        check_names(schedule, names)
        return MixturePlan(dict(zip(names, self.shards, strict=True)), schedule, seed=c.seed, rule=rule,
                           shuffle=c.shuffle,
                           window=c.shuffle_window, pass_length=self._batches_in_pass if self.by_batches else None)

    def reschedule(self, config: TextLoaderConfig) -> None:
        """Blend by ``config.weights`` from now on: the passes' orders and batches (which no weight changes)
        are kept; the epochs' spans are computed anew."""
        self.config = config
        self.plan = self._mixture(self._rule())

    def _rule(self) -> EpochRule:
        c = self.config
        if c.epoch_until is not None or c.epoch_length is not None:
            return epoch_rule(c.epoch_length, c.epoch_until, 0)
        one_pass = sum(self._batches_in_pass(i, 0) if self.by_batches else len(x) for i, x in enumerate(self.lengths))
        return epoch_rule(None, None, one_pass)  # default: as many units as one pass over every source

    def fingerprint(self, sources: list[str]) -> str:
        """Of the sources (their manifests' fingerprints) and the blend: a state from another mixture is refused."""
        c = self.config
        blend = {"sources": sources, "names": list(self.names),
                 "points": [[position, list(weights)] for position, weights in c.weights.points],
                 "interpolation": c.weights.interpolation, "rule": [c.epoch_length, c.epoch_until]}
        return "mix-" + hashlib.sha256(json.dumps(blend, sort_keys=True, default=str).encode()).hexdigest()[:16]

    # -- per-source passes in batches (bucket, budget) -----------------------------------------------------
    def _pass_plan(self, source: int, number: int) -> BatchPlan:
        """Source ``source``'s pass ``number`` batched on its own (its local sample ids)."""
        key = (source, number)
        if key not in self._pass_plans:
            if len(self._pass_plans) >= _PASS_CACHE:
                self._pass_plans.pop(next(iter(self._pass_plans)))
            c = self.config
            order = self.plan.pass_order(source, number)
            rng = plans.epoch_rng(c.seed * 1_000_003 + zlib.crc32(self.names[source].encode()), number) \
                if c.shuffle else None
            lengths = self.lengths[source]
            if c.mode == "bucket":
                self._pass_plans[key] = plans.bucket_plan(lengths, c.batch_size, window=c.window, rng=rng,
                                                          drop_last=c.drop_last, order=order)
            else:
                self._pass_plans[key] = plans.budget_plan(lengths, c.max_tokens, window=c.window,
                                                          pad_multiple=c.pad_multiple, rng=rng, order=order)
        return self._pass_plans[key]

    def _batches_in_pass(self, source: int, number: int) -> int:
        return len(self._pass_plan(source, number))

    # -- the epoch -------------------------------------------------------------------------------------------
    def global_plan(self, epoch: int) -> tuple[PackStream | None, BatchPlan]:
        """The epoch's batches over all ranks (and the token stream when packing), as ``TextLoader.global_plan``."""
        c = self.config
        if self.by_batches:
            sources, passes, within = self.plan.units(epoch)
            batches = [self.offsets[s] + self._pass_plan(s, p).batch(w)
                       for s, p, w in zip(sources.tolist(), passes.tolist(), within.tolist(), strict=True)]
            return None, plans.from_batches(batches, source=sources.astype(np.int64))
        order = self.plan.order(epoch)
        if c.mode == "pack":
            return plans.pack_plan(self.all_lengths, block_size=c.block_size, batch_size=c.batch_size, rng=None,
                                   drop_last=c.drop_last, order=order)
        return None, plans.fixed_plan(len(order), c.batch_size, rng=None, drop_last=c.drop_last, order=order)

    def source_of(self, samples: np.ndarray) -> np.ndarray:
        """The source index of each (combined) sample id."""
        return np.searchsorted(self.offsets, samples, side="right") - 1

    # -- counting what was read ------------------------------------------------------------------------------
    def count_batch(self, counts: SourceCounts, samples: np.ndarray, lengths: np.ndarray, real: int,
                    pieces: plans.Pieces | None) -> None:
        """A batch's samples and tokens per source into ``counts``: a bucket or budget batch is one source's (two
        scalar additions, ~1 us); packed rows from the document ``pieces`` their read has found (finding them
        again cost ~20 us of a ~175 us batch); fixed batches with two bincounts."""
        if pieces is not None:
            counts.add(*self.piece_counts(pieces))
        elif self.by_batches:
            if len(samples):
                counts.add_one(bisect.bisect_right(self.offset_list, int(samples[0])) - 1, len(samples), real)
        else:
            counts.add(*self.sample_counts(samples, lengths))

    def sample_counts(self, samples: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(samples, tokens) of each source among whole ``samples`` (``lengths``: every sample's token count)."""
        source, k = self.source_of(samples), len(self.names)
        return np.bincount(source, minlength=k), np.bincount(source, weights=lengths[samples], minlength=k)

    def piece_counts(self, pieces: plans.Pieces) -> tuple[np.ndarray, np.ndarray]:
        """(samples, tokens) of each source in packed rows' document ``pieces``: each piece's tokens, and each
        document counted where it starts."""
        source, k = self.source_of(pieces.sample), len(self.names)
        return (np.bincount(source, weights=pieces.lo == 0, minlength=k),
                np.bincount(source, weights=pieces.hi - pieces.lo, minlength=k))

    def source_counts(self, stream: PackStream | None, full: BatchPlan, start: int, stop: int,
                      lengths: np.ndarray) -> np.ndarray:
        """Samples and tokens of each source (int64 ``(sources, 2)``) in batches ``start .. stop - 1`` of an
        epoch's plan (``TextLoader.source_counts``)."""
        start, stop = min(max(start, 0), len(full)), min(max(stop, 0), len(full))
        rows = full.samples[full.offsets[start]:full.offsets[max(start, stop)]]
        counts = self.piece_counts(stream.pieces(rows)) if stream is not None else self.sample_counts(rows, lengths)
        return np.stack(counts, axis=1).astype(np.int64)

    def passes(self, stream: PackStream | None, full: BatchPlan, consumed: int, epoch: int) -> dict[str, int]:
        """The passes each source has finished once the first ``consumed`` batches of ``epoch``'s plan are read:
        the blend's units are batches (bucket, budget), samples (fixed), or documents begun (pack)."""
        consumed = min(consumed, len(full))
        if self.by_batches:
            units = consumed
        elif stream is None:
            units = int(full.offsets[consumed])
        else:
            rows = full.offsets[consumed]
            units = int(np.searchsorted(stream.stream_offsets[:-1], rows * stream.block_size, side="left"))
        return {name: entry["passes"] for name, entry in self.plan.counts(epoch, units).items()}
