"""The batches of a text epoch, as pure functions of (lengths, options, seed, epoch).

A plan is built for the whole epoch across all ranks, independent of the
world size, then dealt batch by batch with ``dataio.sampling.partition.rank_share``:
every rank gets the same number of batches, even when batch sizes vary
(token budget), which is what keeps DDP from hanging, and the batches
consumed are always a prefix of the plan, which makes resumption elastic.
The base order is ``partition.epoch_order`` (shards, then windows). Plans
are CSR arrays:

- ``BatchPlan.samples``: int64 ``(total,)`` sample ids, batch after batch;
- ``BatchPlan.offsets``: int64 ``(num_batches + 1,)``: batch ``b`` is
  ``samples[offsets[b]:offsets[b + 1]]``;
- ``BatchPlan.repeated``: bool ``(num_batches,)``: batches repeated to even out
  the ranks (``drop_last=False``), which evaluation should skip.

Packing plans are rows of a token stream instead (``PackPlan``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dataio.sampling import partition


@dataclass(frozen=True)
class BatchPlan:
    samples: np.ndarray
    offsets: np.ndarray
    repeated: np.ndarray
    source: np.ndarray | None = None  # a mixture's batches in bucket and budget mode: each batch's source

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def batch(self, index: int) -> np.ndarray:
        return self.samples[self.offsets[index]:self.offsets[index + 1]]

    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)


def round_up(value: np.ndarray | int, multiple: int) -> np.ndarray | int:
    return -(-value // multiple) * multiple


def epoch_rng(seed: int, epoch: int) -> np.random.Generator:
    return np.random.default_rng([seed, epoch, 0x7E47])


def from_batches(batches: list[np.ndarray], source: np.ndarray | None = None) -> BatchPlan:
    sizes = np.array([len(b) for b in batches], dtype=np.int64)
    offsets = np.zeros(len(batches) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    samples = np.concatenate(batches).astype(np.int64) if batches else np.zeros(0, dtype=np.int64)
    return BatchPlan(samples, offsets, np.zeros(len(batches), dtype=bool), source)


def _base_order(num_samples: int, rng: np.random.Generator | None, order: np.ndarray | None) -> np.ndarray:
    if order is not None:
        return order
    return rng.permutation(num_samples) if rng is not None else np.arange(num_samples)


def fixed_plan(num_samples: int, batch_size: int, *, rng: np.random.Generator | None, drop_last: bool,
               order: np.ndarray | None = None) -> BatchPlan:
    """Batches of ``batch_size`` in ``order`` (default: random, or in order with ``rng=None``)."""
    order = _base_order(num_samples, rng, order)
    stop = num_samples - num_samples % batch_size if drop_last else num_samples
    return from_batches([order[i:i + batch_size] for i in range(0, stop, batch_size)])


def _sorted_windows(lengths: np.ndarray, window: int, rng: np.random.Generator | None,
                    order: np.ndarray | None) -> list[np.ndarray]:
    """Shuffled order cut into windows, each sorted by length (the 'sortish' sampler)."""
    order = _base_order(len(lengths), rng, order)
    windows = [order[i:i + window] for i in range(0, len(order), window)]
    return [w[np.argsort(lengths[w], kind="stable")] for w in windows]


def bucket_plan(lengths: np.ndarray, batch_size: int, *, window: int, rng: np.random.Generator | None,
                drop_last: bool, order: np.ndarray | None = None) -> BatchPlan:
    """Batches of ``batch_size`` similar-length samples; batch order shuffled."""
    batches = [w[i:i + batch_size] for w in _sorted_windows(lengths, window, rng, order)
               for i in range(0, len(w), batch_size)]
    if drop_last:
        batches = [b for b in batches if len(b) == batch_size]
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return from_batches(batches)


def budget_plan(lengths: np.ndarray, max_tokens: int, *, window: int, pad_multiple: int,
                rng: np.random.Generator | None, order: np.ndarray | None = None) -> BatchPlan:
    """Batches whose rows x padded length stay within ``max_tokens``; batch order shuffled."""
    longest = int(round_up(int(lengths.max(initial=0)), pad_multiple))
    if longest > max_tokens:
        worst = int(np.argmax(lengths))
        raise ValueError(f"sample {worst} has {lengths[worst]} tokens (padded {longest}) > max_tokens {max_tokens}")
    batches = []
    for w in _sorted_windows(lengths, window, rng, order):
        padded = round_up(lengths[w], pad_multiple)  # ascending within the window
        start = 0
        while start < len(w):
            # rows k..: with ascending lengths the padded length of rows start..end is padded[end-1]
            rows = np.arange(1, len(w) - start + 1)
            fits = rows * padded[start:] <= max_tokens
            count = int(np.argmin(fits)) if not fits.all() else len(fits)
            batches.append(w[start:start + max(1, count)])
            start += max(1, count)
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return from_batches(batches)


def deal(plan: BatchPlan, *, world_size: int, rank: int, drop_last: bool, consumed: int = 0,
         pad: bool = True) -> BatchPlan:
    """Rank ``rank``'s batches of ``plan`` after its first ``consumed`` batches (``partition.rank_share``).

    The remaining batch ``i`` goes to rank ``i % world_size``; a plan whose batches each hold one source (a
    mixture's, ``plan.source``) is first reordered within each round of ``world_size`` batches
    (``partition.balanced_rounds``) so every rank reads each source's share. All ranks get
    the same count: the floor with ``drop_last``, otherwise the ceiling, the
    missing ones repeating the epoch's first batches (flagged in ``repeated``).
    A plan that leaves the ranks nothing is an error.
    """
    partition.check_world(len(plan), world_size, drop_last=drop_last, unit="batches")
    indices, repeated = partition.rank_share(len(plan), world_size=world_size, rank=rank, consumed=consumed,
                                             drop_last=drop_last, pad=pad)
    if plan.source is not None and world_size > 1:
        rounds = consumed + partition.balanced_rounds(plan.source[consumed:], world_size)
        indices = np.where(repeated, indices, rounds[np.clip(indices - consumed, 0, max(len(rounds) - 1, 0))])
    batches = [plan.batch(int(i)) for i in indices]
    dealt = from_batches(batches)
    return BatchPlan(dealt.samples, dealt.offsets, repeated | plan.repeated[indices])


@dataclass(frozen=True)
class PackStream:
    """Documents concatenated in ``order`` into one token stream, cut into rows of ``block_size``.

    ``order``: int64 (num_docs,); ``stream_offsets``: int64 (num_docs + 1,),
    where each document starts in the stream. A row is identified by its stream
    start and covers ``[start, start + block_size)``, clipped to the stream end.
    """

    order: np.ndarray
    stream_offsets: np.ndarray
    block_size: int

    @property
    def num_tokens(self) -> int:
        return int(self.stream_offsets[-1])

    def segments(self, start: int) -> list[tuple[int, int, int]]:
        """``(sample, first token, end token)`` pieces of the row starting at ``start``, in order."""
        stop = min(start + self.block_size, self.num_tokens)
        first = int(np.searchsorted(self.stream_offsets, start, side="right")) - 1
        pieces = []
        for position in range(first, len(self.order)):
            doc_start = int(self.stream_offsets[position])
            if doc_start >= stop:
                break
            doc_stop = int(self.stream_offsets[position + 1])
            if doc_stop > doc_start:
                pieces.append((int(self.order[position]), max(start, doc_start) - doc_start,
                               min(stop, doc_stop) - doc_start))
        return pieces

    def pieces(self, starts: np.ndarray) -> "Pieces":
        """Every document piece of the rows starting at ``starts``, in row order: ``segments`` for a whole
        batch at once, in numpy (a Python loop per piece cost ~8 us; a batch of 16 rows of 1,024 tokens
        holds ~70 pieces)."""
        starts = np.asarray(starts, dtype=np.int64)
        offsets = self.stream_offsets
        stops = np.minimum(starts + self.block_size, self.num_tokens)
        first = np.searchsorted(offsets, starts, side="right") - 1
        last = np.searchsorted(offsets, stops, side="left") - 1  # the document holding each row's last token
        counts = np.maximum(last - first + 1, 0)
        row = np.repeat(np.arange(len(starts), dtype=np.int64), counts)
        position = np.repeat(first - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        doc_start, doc_stop = offsets[position], offsets[position + 1]
        keep = doc_stop > doc_start  # empty documents hold no piece
        row, position, doc_start, doc_stop = row[keep], position[keep], doc_start[keep], doc_stop[keep]
        begin = np.maximum(starts[row], doc_start)
        end = np.minimum(stops[row], doc_stop)
        return Pieces(sample=self.order[position], lo=begin - doc_start, hi=end - doc_start, row=row,
                      column=begin - starts[row])


@dataclass(frozen=True)
class Pieces:
    """Document pieces of packed rows: tokens ``lo .. hi - 1`` of ``sample``, at ``row``, ``column``."""

    sample: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    row: np.ndarray
    column: np.ndarray

    def __len__(self) -> int:
        return len(self.sample)


def pack_plan(lengths: np.ndarray, *, block_size: int, batch_size: int, rng: np.random.Generator | None,
              drop_last: bool, order: np.ndarray | None = None) -> tuple[PackStream, BatchPlan]:
    """The token stream and the epoch's batches of row starts (deal them with ``deal``)."""
    order = _base_order(len(lengths), rng, order)
    offsets = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(lengths[order], out=offsets[1:])
    total = int(offsets[-1])
    num_rows = total // block_size if drop_last else -(-total // block_size)
    starts = np.arange(num_rows, dtype=np.int64) * block_size
    batches = [starts[i:i + batch_size] for i in range(0, num_rows, batch_size)]
    if drop_last:
        batches = [b for b in batches if len(b) == batch_size]
    return PackStream(order.astype(np.int64), offsets, block_size), from_batches(batches)


def epoch_plan(lengths: np.ndarray, shard_of: np.ndarray, config: Any,
               epoch: int) -> tuple[PackStream | None, BatchPlan]:
    """One source's batches of ``epoch`` over all ranks (and the token stream when packing), in the mode of
    ``config`` (a ``TextLoaderConfig``): a pure function of (lengths, shards, options, seed, epoch)."""
    c = config
    rng = epoch_rng(c.seed, epoch) if c.shuffle else None
    order = partition.epoch_order(shard_of, seed=c.seed, epoch=epoch, shuffle=c.shuffle, window=c.shuffle_window)
    if c.mode == "pack":
        return pack_plan(lengths, block_size=c.block_size, batch_size=c.batch_size, rng=rng, drop_last=c.drop_last,
                         order=order)
    if c.mode == "fixed":
        return None, fixed_plan(len(lengths), c.batch_size, rng=rng, drop_last=c.drop_last, order=order)
    if c.mode == "bucket":
        return None, bucket_plan(lengths, c.batch_size, window=c.window, rng=rng, drop_last=c.drop_last, order=order)
    return None, budget_plan(lengths, c.max_tokens, window=c.window, pad_multiple=c.pad_multiple, rng=rng, order=order)


def samples_at(plan: BatchPlan, position: int) -> int:
    """Samples (rows; block rows when packing) in the first ``position`` batches of ``plan``."""
    return int(plan.offsets[position])


def position_of(plan: BatchPlan, samples: int, epoch: int) -> int:
    """The batch of ``plan`` at which ``samples`` rows were read: a saved state's position in batches."""
    position = int(np.searchsorted(plan.offsets, samples))
    if position >= len(plan.offsets) or plan.offsets[position] != samples:
        raise ValueError(f"samples_consumed={samples} is not at a batch boundary of epoch {epoch}'s plan: "
                         "was the state saved with other batching options?")
    return position
