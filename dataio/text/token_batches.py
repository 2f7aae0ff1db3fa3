"""The text loader's sample source: a batch of plan rows read into padded or packed token rows, in one pass.

Padded modes (fixed, bucket, budget): the rows are samples; ``collate.padded_rows``
gathers, pads, masks, labels and checks them in one C pass, and a row with an id
past the vocabulary is a failure the driver drops (the batch is then cut to its
longest remaining row). Pack mode: the rows are stream starts; each document
piece is read and checked (``collate.pack_rows``) and a bad piece is blanked,
not dropped (masked, no labels, its boundaries kept), so rows keep their shape.
Each batch is read inline when the loader asks for it: ~20 us, no thread.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataio.pipeline.host_batch import HostBatch
from dataio.pipeline.pass_plan import PassPlan
from dataio.pipeline.sample_source import BatchStart, Failures
from dataio.pipeline.stage_times import Lap, StageTimes
from dataio.text import batch_plans as plans
from dataio.text.collate import blank_piece, pack_rows, padded_rows, padded_width
from dataio.text.token_shards import TokenShards



class TokenBatchSource:
    """Batches of ``shards``' token rows, padded to a multiple of ``pad_multiple``, or packed from ``stream``;
    ``ignore_index`` labels the positions without a next token."""

    def __init__(self, shards: TokenShards, times: StageTimes, *, pad_multiple: int, ignore_index: int) -> None:
        self.shards, self.times, self.pad_multiple, self.ignore_index = shards, times, pad_multiple, ignore_index
        self.stream: plans.PackStream | None = None  # pack mode: the current epoch's token stream

    def __len__(self) -> int:
        return len(self.shards)

    def begin_pass(self, plan: PassPlan) -> None:
        pass

    def end_pass(self) -> None:
        pass

    def start_batch(self, index: int, rows: np.ndarray, key: Any) -> BatchStart:
        # The task fills the dicts of a BatchStart it does not hold: one that held it (a closure over the
        # BatchStart, which holds the task) was a reference cycle, freed only by the cyclic collector, so each
        # batch's arrays outlived it and the next batch's writes went to cold memory (40 us a batch, not 28).
        fields: dict[str, Any] = {}
        shared: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        return BatchStart(fields, [lambda: self._read(rows, fields, shared, extra)], shared, (), extra)

    def _read(self, rows: np.ndarray, fields: dict, shared: dict, extra: dict) -> Failures:
        """Fill the batch's dicts (timed in ``stats.stages``: padded ``read``; packed ``collate`` for finding the
        pieces and ``read`` for the rest); the failed rows (or pieces) and their errors."""
        lap = self.times.lap()
        if self.stream is None:
            failures = self._padded(rows, fields, lap)
        else:
            failures = self._packed(rows, self.stream, fields, shared, extra, lap)
        lap.items = len(rows)
        lap.flush()
        return failures

    def _padded(self, rows: np.ndarray, fields: dict, lap: Lap) -> Failures:
        with lap("read"):
            batch, largest = padded_rows(self.shards.arrays, rows, self.pad_multiple, self.shards.pad_id,
                                         self.ignore_index)
            bad = self.shards.past_vocabulary(rows, batch["input_ids"], largest)
        fields.update(batch, sample_ids=np.asarray(rows, dtype=np.int64))
        return bad

    def _packed(self, rows: np.ndarray, stream: plans.PackStream, fields: dict, shared: dict, extra: dict,
                lap: Lap) -> Failures:
        with lap("collate"):
            pieces = stream.pieces(rows)
        with lap("read"):
            batch, largest = pack_rows(pieces, len(rows), stream.block_size, self.shards.arrays,
                                       pad_id=self.shards.pad_id, ignore_index=self.ignore_index)
        shared.update(cu_seqlens=batch.pop("cu_seqlens"), max_seqlen=batch.pop("max_seqlen"))
        fields.update(batch)
        extra.update(pieces=pieces, samples_ok=len(pieces))
        bad = np.flatnonzero(largest >= self.shards.vocab_size) if self.shards.vocab_size else ()
        return [(int(i), self.shards.past_vocabulary_error(int(pieces.sample[i]), int(largest[i]))) for i in bad]

    def without(self, batch: HostBatch, positions: list[int]) -> HostBatch:
        """Padded: the bad rows dropped, the batch cut to its longest remaining row. Packed: the bad pieces
        blanked in place, every row and boundary kept."""
        pieces = batch.extra.get("pieces")
        if pieces is not None:
            fields = {**batch.fields, **batch.shared}
            for index in positions:
                blank_piece(fields, pieces, index, self.shards.pad_id, self.ignore_index)
            batch.extra["samples_ok"] = len(pieces) - len(positions)
            return batch
        keep = np.ones(len(batch), dtype=bool)
        keep[positions] = False
        batch = batch.keep(keep)
        width = padded_width(batch.fields["lengths"], self.pad_multiple)
        batch.fields = {name: array[:, :width] if array.ndim == 2 else array for name, array in batch.fields.items()}
        return batch

    def close(self) -> None:
        pass  # the shards are the loader's data's (``token_data``)

