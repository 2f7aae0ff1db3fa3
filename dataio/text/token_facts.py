"""What a text loader's batches are made of: the padding id, the label ignore index, the vocabulary size.

A model is built from ``loader.vocab_size`` and its loss told ``ignore_index``
(torch's -100 by default; nanoGPT's -1), so ``TextLoader`` holds them beside
the shards, and its collation calls (``dataio.text.collate``) take them here.
"""

from __future__ import annotations

import numpy as np

from dataio.text.batch_plans import Pieces
from dataio.text.collate import blank_piece, pack_rows, padded_rows
from dataio.text.config import TextLoaderConfig
from dataio.text.token_shards import TokenShards


class TokenFacts:
    """A mixin for a loader with ``shards`` (``TokenShards``) and ``config`` (``TextLoaderConfig``)."""

    shards: TokenShards
    config: TextLoaderConfig

    @property
    def pad_id(self) -> int:
        """The tokenizer's padding id: ``input_ids`` past each row's tokens."""
        return self.shards.pad_id

    @property
    def vocab_size(self) -> int:
        """The tokenizer's vocabulary size, as the manifest records it: every id is below it (ids past it are
        bad samples, ``on_error``); 0 for a folder whose manifest records none. ``nn.Embedding(vocab_size, d)``."""
        return self.shards.vocab_size

    def _padded_rows(self, rows: np.ndarray) -> tuple[dict[str, np.ndarray], int]:
        return padded_rows(self.shards.arrays, rows, self.config.pad_multiple, self.pad_id, self.config.ignore_index)

    def _pack_rows(self, pieces: Pieces, rows: int, block: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return pack_rows(pieces, rows, block, self.shards.arrays, pad_id=self.pad_id,
                         ignore_index=self.config.ignore_index)

    def _blank_piece(self, batch: dict[str, np.ndarray], pieces: Pieces, index: int) -> None:
        blank_piece(batch, pieces, index, self.pad_id, self.config.ignore_index)
