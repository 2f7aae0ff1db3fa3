"""Turn planned samples into model-ready numpy batches (padded rows, or packed rows).

Labels are shifted for causal LM: ``labels[:, t] = input_ids[:, t + 1]``, with
-100 (ignored by ``cross_entropy``) on padding, after the last token of each
sequence, and across document boundaries in packed rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from dataio.formats.fallback_log import warn_once
from dataio.text.batch_plans import PackStream, round_up

try:  # the padded batch in one pass in C (dataio/text/_collate.c); optional like the other extensions
    from dataio.text import _collate
except ImportError:  # reported by check_install, and once per process when a padded batch is built
    _collate = None

IGNORE = -100
WITHOUT_EXTENSION = ("padded text batches: dataio.text._collate is not built, so budget, bucket and fixed batches "
                     "are padded with numpy (~3.7x the time per batch: 62 us against 17 for an 8k-token batch)")


class TokenArrays(NamedTuple):
    """Where every sample's token ids lie: the chunks (1-D unsigned arrays), and per sample its chunk, first
    token and length (``TokenShards.arrays``)."""

    values: list[np.ndarray]
    chunk_of: np.ndarray  # int32
    starts: np.ndarray  # int64
    lengths: np.ndarray  # int64


def padded_width(lengths: np.ndarray, pad_multiple: int) -> int:
    """The longest row rounded up to ``pad_multiple`` (at least one token)."""
    longest = int(lengths.max()) if len(lengths) else 1
    return -(-max(longest, 1) // pad_multiple) * pad_multiple


def padded_batch(input_ids: np.ndarray, lengths: np.ndarray) -> dict[str, np.ndarray]:
    """The batch of padded rows ``input_ids`` (B, L) of ``lengths``: the mask and shifted labels added."""
    width = input_ids.shape[1]
    mask = np.arange(width)[None, :] < lengths[:, None]
    labels = np.full_like(input_ids, IGNORE)
    labels[:, :-1] = np.where(mask[:, 1:], input_ids[:, 1:], IGNORE)
    return {"input_ids": input_ids, "attention_mask": mask.astype(np.int64), "labels": labels, "lengths": lengths}


def padded_rows(tokens: TokenArrays, rows: np.ndarray, pad_multiple: int,
                pad_id: int) -> tuple[dict[str, np.ndarray], int]:
    """The padded batch of samples ``rows`` (``padded_width`` columns; ``padded_batch``'s arrays), and
    the largest token id of the samples (padding aside; -1 when none), so the vocabulary check is one
    comparison.

    With the C extension every element is written once in one pass over the rows; without it, numpy: a slice
    copy per row (the cheapest gather of contiguous ids: 88M tokens/s against 45M for whole-batch fancy
    indexing, 64k-token batches, 2-core VM), then ``padded_batch``.
    """
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    lengths = tokens.lengths[rows]
    width = padded_width(lengths, pad_multiple)
    if _collate is not None:
        ids, mask, labels = (np.empty((len(rows), width), dtype=np.int64) for _ in range(3))
        largest = _collate.padded_rows(tokens.values, tokens.chunk_of, tokens.starts, tokens.lengths, rows, pad_id,
                                       IGNORE, ids, mask, labels)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels, "lengths": lengths}, largest
    warn_once("collate", WITHOUT_EXTENSION)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    values, chunk_of, starts = tokens.values, tokens.chunk_of, tokens.starts
    for row, sample in enumerate(rows.tolist()):
        start = starts[sample]
        ids[row, :lengths[row]] = values[chunk_of[sample]][start:start + lengths[row]]
    batch = padded_batch(ids, lengths)
    return batch, int(np.where(batch["attention_mask"] == 1, ids, -1).max(initial=-1))


def pack_rows(starts: np.ndarray, stream: PackStream, tokens: Callable[[int], np.ndarray | None], *,
              pad_id: int) -> dict[str, np.ndarray]:
    """Rows of ``block_size`` tokens cut from the document stream, with per-document boundaries.

    Adds ``position_ids`` (restarting at each document piece) and, for
    variable-length attention over the flattened batch, ``cu_seqlens`` (int32
    piece boundaries, padding counted as one last piece per row) and
    ``max_seqlen``. A sample whose ``tokens`` are None (dropped by the error
    policy) leaves its piece as padding: masked, no labels, boundaries kept.
    """
    block = stream.block_size
    input_ids = np.full((len(starts), block), pad_id, dtype=np.int64)
    labels = np.full_like(input_ids, IGNORE)
    positions = np.zeros_like(input_ids)
    mask = np.zeros_like(input_ids)
    boundaries = [0]
    for r, start in enumerate(starts.tolist()):
        column = 0
        for sample, lo, hi in stream.segments(start):
            ids = tokens(sample)
            n = hi - lo
            if ids is not None:
                piece = ids[lo:hi]
                input_ids[r, column:column + n] = piece
                labels[r, column:column + n - 1] = piece[1:]
                positions[r, column:column + n] = np.arange(n)
                mask[r, column:column + n] = 1
            column += n
            boundaries.append(r * block + column)
        if column < block:
            boundaries.append((r + 1) * block)  # the row's padding as its own piece
    cu = np.array(boundaries, dtype=np.int32)
    return {"input_ids": input_ids, "attention_mask": mask, "labels": labels, "position_ids": positions,
            "cu_seqlens": cu, "max_seqlen": np.array(int(np.diff(cu).max(initial=0)))}
