"""Turn planned samples into model-ready numpy batches (padded rows, or packed rows).

Labels are shifted for causal LM: ``labels[:, t] = input_ids[:, t + 1]``, with
-100 (ignored by ``cross_entropy``) on padding, after the last token of each
sequence, and across document boundaries in packed rows.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dataio.text.batch_plans import PackStream, round_up

IGNORE = -100


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
