"""What an image-text pair loader says beside its batches: the vocabulary and padding id of ``input_ids``.

A text tower is sized by ``loader.vocab_size`` as a ``TextLoader`` user sizes a model (``dataio.text.token_facts``):
the stored tokenizer's, as the manifest records it, or that of ``CaptionConfig.tokenizer``.
"""

from __future__ import annotations

from dataio.images.image_facts import ImageFacts
from dataio.pairs.pair_batches import PairBatchSource


class PairFacts(ImageFacts):
    """The facts of a ``PairBatchSource``'s batches."""

    source: PairBatchSource

    @property
    def vocab_size(self) -> int:
        """Every id in ``input_ids`` is below it: ``nn.Embedding(vocab_size, d)``; 0 when the batches carry no ids
        (captions as strings)."""
        captions = self.source.captions
        return int(captions.vocab) if captions.ids else 0

    @property
    def pad_id(self) -> int | None:
        """The id in ``input_ids`` past each caption's tokens (``attention_mask`` 0); None without ids."""
        captions = self.source.captions
        return int(captions.pad_id) if captions.ids else None
