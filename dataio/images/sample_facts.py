"""What a user builds a model or an evaluation from beside an image folder's batches: the vocabulary and
padding id of a pair folder's ``input_ids``, and the COCO category id of each box label.

A text tower is sized by ``loader.vocab_size`` as a ``TextLoader`` user sizes a model
(``dataio.text.token_facts``). COCO's evaluation (pycocotools' ``loadRes``, ``COCOeval``) takes COCO's own
category ids, while batches carry contiguous labels (``convert coco`` maps the ids, which have gaps, to
``0..K-1`` in the JSON's order and records ``[id, name, supercategory]`` per label in the manifest): the
ids are read back from that record, so a prediction's label goes back to its category without the JSON.
"""

from __future__ import annotations

from typing import Any

from dataio.formats.dataset.manifest import Manifest
from dataio.images.pair_batches import PairBatchSource


def coco_category_ids(manifest: Manifest, classes: tuple[str, ...]) -> tuple[int, ...] | None:
    """COCO's category id of each label (``ids[label]``), or None where the folder records none (a folder not
    converted from COCO, a mixture); a record that does not line up with ``classes`` is None too."""
    record = manifest.options.get("categories")
    if not isinstance(record, list) or len(record) != len(classes):
        return None
    ids = tuple(int(entry[0]) for entry in record)
    names = tuple(str(entry[1]) for entry in record)
    return ids if names == tuple(classes) else None


class SampleFacts:
    """A mixin for ``ImageLoader`` (its ``source``, ``manifest``, ``mixture``, ``classes``): what its samples are."""

    source: Any
    manifest: Manifest
    mixture: Any
    classes: tuple[str, ...]

    @property
    def pairs(self) -> bool:
        """Whether the samples are image-text pairs: batches are dicts (``dataio.images.caption_config``)."""
        return isinstance(self.source, PairBatchSource)

    @property
    def vocab_size(self) -> int:
        """The vocabulary size of a pair batch's ``input_ids`` (the stored tokenizer's, as the manifest records it,
        or that of ``CaptionConfig.tokenizer``): every id is below it, ``nn.Embedding(vocab_size, d)``; 0 when
        the batches carry no ids (classification, boxes, captions as strings)."""
        captions = self.source.captions if self.pairs else None
        return int(captions.vocab) if captions is not None and captions.ids else 0

    @property
    def pad_id(self) -> int | None:
        """The id in ``input_ids`` past each caption's tokens (``attention_mask`` 0); None without ids."""
        captions = self.source.captions if self.pairs else None
        return int(captions.pad_id) if captions is not None and captions.ids else None

    @property
    def category_ids(self) -> tuple[int, ...] | None:
        """A COCO folder's category id of each label (``category_ids[label]``, for pycocotools' ``loadRes``);
        None for other folders and mixtures."""
        return None if self.mixture else coco_category_ids(self.manifest, self.classes)
