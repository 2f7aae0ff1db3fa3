"""Turn planned samples into model-ready numpy batches (padded rows, or packed rows).

Labels are shifted for causal LM: ``labels[:, t] = input_ids[:, t + 1]``, with
``ignore_index`` (-100 by default, ``cross_entropy``'s; nanoGPT's is -1) on
padding, after the last token of each sequence, and across document
boundaries in packed rows.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dataio.formats.fallback_log import warn_once
from dataio.text.batch_plans import Pieces

try:  # the padded batch in one pass in C (dataio/text/_collate.c); optional like the other extensions
    from dataio.text import _collate
except ImportError:  # reported by check_install, and once per process when a padded batch is built
    _collate = None

IGNORE = -100  # the default ignore_index: torch's cross_entropy's
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


def padded_batch(input_ids: np.ndarray, lengths: np.ndarray, ignore_index: int = IGNORE) -> dict[str, np.ndarray]:
    """The batch of padded rows ``input_ids`` (B, L) of ``lengths``: the mask and shifted labels added."""
    width = input_ids.shape[1]
    mask = np.arange(width)[None, :] < lengths[:, None]
    labels = np.full_like(input_ids, ignore_index)
    labels[:, :-1] = np.where(mask[:, 1:], input_ids[:, 1:], ignore_index)
    return {"input_ids": input_ids, "attention_mask": mask.astype(np.int64), "labels": labels, "lengths": lengths}


def padded_rows(tokens: TokenArrays, rows: np.ndarray, pad_multiple: int, pad_id: int,
                ignore_index: int = IGNORE) -> tuple[dict[str, np.ndarray], int]:
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
                                       ignore_index, ids, mask, labels)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels, "lengths": lengths}, largest
    warn_once("collate", WITHOUT_EXTENSION)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    values, chunk_of, starts = tokens.values, tokens.chunk_of, tokens.starts
    for row, sample in enumerate(rows.tolist()):
        start = starts[sample]
        ids[row, :lengths[row]] = values[chunk_of[sample]][start:start + lengths[row]]
    batch = padded_batch(ids, lengths, ignore_index)
    return batch, int(np.where(batch["attention_mask"] == 1, ids, -1).max(initial=-1))


def pack_rows(pieces: Pieces, rows: int, block: int, tokens: TokenArrays, *, pad_id: int,
              ignore_index: int = IGNORE) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``rows`` rows of ``block`` tokens filled with document ``pieces`` (``PackStream.pieces``), with
    per-document boundaries; and the largest id of each piece's whole document (-1 if empty), for the
    vocabulary check: a document with a bad id is dropped whole, all its pieces, as in the padded modes.

    Adds ``position_ids`` (restarting at each document piece) and, for
    variable-length attention over the flattened batch, ``cu_seqlens`` (int32
    piece boundaries, padding counted as one last piece per row) and
    ``max_seqlen``. Labels stop at each piece's last token: never across a document
    boundary. A piece the error policy drops is blanked by ``blank_piece``.
    """
    ids = np.empty((rows, block), dtype=np.int64)
    labels, positions, mask = np.empty_like(ids), np.empty_like(ids), np.empty_like(ids)
    largest = np.empty(len(pieces), dtype=np.int64)
    if _collate is not None:
        _collate.packed_rows(tokens.values, tokens.chunk_of, tokens.starts, tokens.lengths, pieces.sample,
                             pieces.lo, pieces.hi, pieces.row, pieces.column, pad_id, ignore_index, ids, mask,
                             labels, positions, largest)
    else:
        warn_once("collate", WITHOUT_EXTENSION)
        ids.fill(pad_id), labels.fill(ignore_index), positions.fill(0), mask.fill(0)
        for p, (sample, lo, hi, r, column) in enumerate(zip(*(a.tolist() for a in (
                pieces.sample, pieces.lo, pieces.hi, pieces.row, pieces.column)), strict=True)):
            start = tokens.starts[sample]
            piece = tokens.values[tokens.chunk_of[sample]][start + lo:start + hi]
            n = hi - lo
            ids[r, column:column + n] = piece
            labels[r, column:column + max(n - 1, 0)] = piece[1:]
            positions[r, column:column + n] = np.arange(n)
            mask[r, column:column + n] = 1
            document = tokens.values[tokens.chunk_of[sample]][start:start + tokens.lengths[sample]]
            largest[p] = int(document.max()) if len(document) else -1
    ends = pieces.row * block + pieces.column + (pieces.hi - pieces.lo)
    filled = np.zeros(rows, dtype=np.int64)
    np.maximum.at(filled, pieces.row, pieces.column + (pieces.hi - pieces.lo))
    padding = (np.flatnonzero(filled < block) + 1) * block  # each row's padding as its own piece
    cu = np.concatenate([[0], np.sort(np.concatenate([ends, padding]))]).astype(np.int32)
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels, "position_ids": positions,
             "cu_seqlens": cu, "max_seqlen": np.array(int(np.diff(cu).max(initial=0)))}
    return batch, largest


def blank_piece(batch: dict[str, np.ndarray], pieces: Pieces, index: int, pad_id: int,
                ignore_index: int = IGNORE) -> None:
    """Piece ``index`` of ``pack_rows``'s batch as padding (masked, no labels); the boundaries stay."""
    r, column = int(pieces.row[index]), int(pieces.column[index])
    stop = column + int(pieces.hi[index] - pieces.lo[index])
    batch["input_ids"][r, column:stop] = pad_id
    batch["labels"][r, column:stop] = ignore_index
    batch["position_ids"][r, column:stop] = 0
    batch["attention_mask"][r, column:stop] = 0
