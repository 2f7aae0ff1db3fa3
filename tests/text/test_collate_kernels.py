"""The padded and packed text batches of ``dataio.text._collate`` against their definitions and the numpy
fallback, for every token dtype and shape."""

from __future__ import annotations

import numpy as np
import pytest

from dataio.text import collate
from dataio.text.batch_plans import Pieces, pack_plan
from dataio.text.collate import IGNORE, TokenArrays, pack_rows, padded_rows


def _arrays(rng: np.random.Generator, dtype: type, samples: int = 60) -> TokenArrays:
    top = np.iinfo(dtype).max
    lengths = rng.integers(0, 40, size=samples)
    lengths[:3] = [0, 1, 2]  # an empty sample, a single token, two
    chunk_of = rng.integers(0, 3, size=samples).astype(np.int32)
    values, starts = [], np.zeros(samples, dtype=np.int64)
    for chunk in range(3):
        mine = np.flatnonzero(chunk_of == chunk)
        starts[mine] = np.concatenate([[0], np.cumsum(lengths[mine])[:-1]]) + 5  # 5 ids of slack before
        values.append(rng.integers(0, top, size=int(lengths[mine].sum()) + 9, endpoint=True).astype(dtype))
    return TokenArrays(values, chunk_of, starts, lengths.astype(np.int64))


def _expected(tokens: TokenArrays, rows: np.ndarray, multiple: int, pad_id: int) -> dict[str, np.ndarray]:
    """Written out element by element: nothing shared with either implementation."""
    lengths = tokens.lengths[rows]
    width = max(1, -(-max(int(lengths.max(initial=0)), 1) // multiple) * multiple)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    labels = np.full_like(ids, IGNORE)
    for r, sample in enumerate(rows):
        start, n = tokens.starts[sample], tokens.lengths[sample]
        seq = tokens.values[tokens.chunk_of[sample]][start:start + n].astype(np.int64)
        for t in range(n):
            ids[r, t], mask[r, t] = seq[t], 1
            if t + 1 < n:
                labels[r, t] = seq[t + 1]
    return {"input_ids": ids, "attention_mask": mask, "labels": labels, "lengths": lengths}


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32])
@pytest.mark.parametrize("multiple", [1, 8])
@pytest.mark.parametrize("compiled", [True, False])
def test_padded_rows_match_the_definition(dtype, multiple, compiled, monkeypatch):
    if compiled:
        assert collate._collate is not None, "dataio.text._collate was not built (the Makefile's venv builds it)"
    else:
        monkeypatch.setattr(collate, "_collate", None)
    rng = np.random.default_rng(int(np.dtype(dtype).itemsize) * 10 + multiple)
    tokens = _arrays(rng, dtype)
    for rows in (np.array([5, 0, 7, 7, 1]), rng.permutation(60)[:17], np.array([0]), np.array([2, 1])):
        batch, largest = padded_rows(tokens, rows, multiple, pad_id=3)
        want = _expected(tokens, rows, multiple, 3)
        assert batch.keys() == want.keys()
        for name in want:
            assert batch[name].dtype == np.int64 and np.array_equal(batch[name], want[name]), (name, rows)
        real = want["input_ids"][want["attention_mask"] == 1]
        assert largest == (int(real.max()) if real.size else -1)


def test_an_empty_batch_is_empty():
    tokens = _arrays(np.random.default_rng(0), np.uint16)
    batch, largest = padded_rows(tokens, np.zeros(0, dtype=np.int64), 8, pad_id=0)
    assert batch["input_ids"].shape == (0, 8) and largest == -1


def test_the_kernel_refuses_out_of_bounds_positions():
    assert collate._collate is not None
    tokens = _arrays(np.random.default_rng(1), np.uint16)
    out = [np.empty((1, 40), dtype=np.int64) for _ in range(3)]
    with pytest.raises(IndexError, match="sample 60 is not below 60"):
        collate._collate.padded_rows(tokens.values, tokens.chunk_of, tokens.starts, tokens.lengths,
                                     np.array([60]), 0, IGNORE, *out)
    starts = tokens.starts.copy()
    starts[4] = len(tokens.values[tokens.chunk_of[4]])  # past its chunk's end
    with pytest.raises(IndexError, match="sample 4: tokens"):
        padded_rows(tokens._replace(starts=starts), np.array([4]), 1, pad_id=0)
    with pytest.raises(TypeError, match="expected uint8/16/32"):
        padded_rows(tokens._replace(values=[v.astype(np.int64) for v in tokens.values]), np.array([3]), 1, pad_id=0)


def _expected_packed(tokens: TokenArrays, stream, starts: np.ndarray, pad_id: int) -> dict[str, np.ndarray]:
    """Packed rows written out piece by piece from ``PackStream.segments``."""
    block = stream.block_size
    ids = np.full((len(starts), block), pad_id, dtype=np.int64)
    labels = np.full_like(ids, IGNORE)
    positions, mask = np.zeros_like(ids), np.zeros_like(ids)
    boundaries = [0]
    for r, start in enumerate(starts.tolist()):
        column = 0
        for sample, lo, hi in stream.segments(start):
            first = tokens.starts[sample]
            seq = tokens.values[tokens.chunk_of[sample]][first + lo:first + hi].astype(np.int64)
            for t in range(hi - lo):
                ids[r, column + t], mask[r, column + t], positions[r, column + t] = seq[t], 1, t
                if t + 1 < hi - lo:
                    labels[r, column + t] = seq[t + 1]
            column += hi - lo
            boundaries.append(r * block + column)
        if column < block:
            boundaries.append((r + 1) * block)
    cu = np.array(boundaries, dtype=np.int32)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels, "position_ids": positions, "cu_seqlens": cu,
            "max_seqlen": np.array(int(np.diff(cu).max(initial=0)))}


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32])
@pytest.mark.parametrize("compiled", [True, False])
def test_packed_rows_match_the_definition(dtype, compiled, monkeypatch):
    if not compiled:
        monkeypatch.setattr(collate, "_collate", None)
    rng = np.random.default_rng(int(np.dtype(dtype).itemsize))
    tokens = _arrays(rng, dtype)  # empty samples included: they hold no piece
    for block, batch_size, drop_last in ((7, 3, False), (64, 2, True), (1, 5, False), (500, 1, False)):
        stream, plan = pack_plan(tokens.lengths, block_size=block, batch_size=batch_size, rng=rng, drop_last=drop_last)
        assert len(plan) >= 1
        for index in range(len(plan)):
            starts = plan.batch(index)
            pieces = stream.pieces(starts)
            batch, largest = pack_rows(pieces, len(starts), block, tokens, pad_id=2)
            want = _expected_packed(tokens, stream, starts, 2)
            assert batch.keys() == want.keys()
            for name in want:
                assert np.array_equal(batch[name], want[name]), (name, block, index)
                assert batch[name].dtype == want[name].dtype
            for p in range(len(pieces)):  # the largest id of the piece's whole document, not the piece's
                first, n = tokens.starts[pieces.sample[p]], tokens.lengths[pieces.sample[p]]
                document = tokens.values[tokens.chunk_of[pieces.sample[p]]][first:first + n]
                assert largest[p] == int(document.max())


def test_the_packed_kernel_refuses_pieces_outside_the_batch():
    tokens = _arrays(np.random.default_rng(2), np.uint16)
    stream, plan = pack_plan(tokens.lengths, block_size=16, batch_size=2, rng=None, drop_last=False)
    pieces = stream.pieces(plan.batch(0))
    with pytest.raises(IndexError, match="lies outside"):
        pack_rows(pieces, 1, 16, tokens, pad_id=0)  # pieces of row 1 in a batch of one row


def test_an_empty_piece_is_written_alike_by_the_kernel_and_numpy(monkeypatch):
    """A piece of no tokens (lo == hi, which the kernel accepts) at column 0 writes nothing in both: numpy's
    labels slice ``column:column + n - 1`` was the whole row but one there."""
    tokens = TokenArrays([np.arange(10, dtype=np.uint16)], np.zeros(2, dtype=np.int32), np.array([0, 4]),
                         np.array([4, 6]))
    pieces = Pieces(*(np.array(v, dtype=np.int64) for v in ([0, 1], [2, 0], [2, 3], [0, 0], [0, 0])))
    assert collate._collate is not None
    compiled, largest = pack_rows(pieces, 1, 5, tokens, pad_id=7)
    monkeypatch.setattr(collate, "_collate", None)
    fallback, fallback_largest = pack_rows(pieces, 1, 5, tokens, pad_id=7)
    assert compiled.keys() == fallback.keys()
    for name in compiled:
        assert np.array_equal(compiled[name], fallback[name]), name
    assert compiled["input_ids"].tolist() == [[4, 5, 6, 7, 7]] and compiled["labels"].tolist()[0][:3] == [5, 6, IGNORE]
    assert largest.tolist() == fallback_largest.tolist() == [3, 9]
