"""What a text loader's batches are made of: the padding id and the vocabulary size.

A model is built from ``loader.vocab_size`` and its loss told ``ignore_index``
(``config.ignore_index``: torch's -100 by default; nanoGPT's -1), so ``TextLoader``
and ``TokenDataset`` hold them beside the shards.
"""

from __future__ import annotations

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
