"""What a loader says about its samples beside their batches, by kind: classification's, and the defaults.

A user builds a model or an evaluation from these: ``loader.vocab_size`` and ``pad_id`` size a text tower (image-text
pairs: ``dataio.pairs.pair_facts``), ``category_ids`` take a box label back to COCO's category
(``dataio.detection.detection_facts``). A kind without them answers as classification does: no vocabulary, no
padding id, no category ids.
"""

from __future__ import annotations

from typing import Any


class ImageFacts:
    """Classification's facts over the opened ``shards`` and what reads them (a loader's batch ``source``, a data
    set's item); the classes are the manifest's, on the loader."""

    def __init__(self, shards: Any, source: Any) -> None:
        self.shards, self.source = shards, source

    @property
    def vocab_size(self) -> int:
        """The vocabulary of the batches' ``input_ids``: 0, there are none."""
        return 0

    @property
    def pad_id(self) -> int | None:
        """The padding id of the batches' ``input_ids``: None, there are none."""
        return None

    @property
    def category_ids(self) -> tuple[int, ...] | None:
        """COCO category ids of the labels: None, the labels are classes."""
        return None
