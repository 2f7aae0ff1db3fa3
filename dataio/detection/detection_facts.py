"""What a box loader says beside its batches: the COCO category id of each box label.

COCO's evaluation (pycocotools' ``loadRes``, ``COCOeval``) takes COCO's own category ids, while batches carry
contiguous labels (``convert coco`` maps the ids, which have gaps, to ``0..K-1`` in the JSON's order and records
``[id, name, supercategory]`` per label in the manifest): the ids are read back from that record, so a prediction's
label goes back to its category without the JSON.
"""

from __future__ import annotations

from dataio.formats.dataset.manifest import Manifest
from dataio.images.image_facts import ImageFacts


def coco_category_ids(manifest: Manifest, classes: tuple[str, ...]) -> tuple[int, ...] | None:
    """COCO's category id of each label (``ids[label]``), or None where the folder records none (a folder not
    converted from COCO, a mixture); a record that does not line up with ``classes`` is None too."""
    record = manifest.options.get("categories")
    if not isinstance(record, list) or len(record) != len(classes):
        return None
    ids = tuple(int(entry[0]) for entry in record)
    names = tuple(str(entry[1]) for entry in record)
    return ids if names == tuple(classes) else None


class DetectionFacts(ImageFacts):
    """The facts of a box source's batches: its folder's category ids (None for a mixture)."""

    @property
    def category_ids(self) -> tuple[int, ...] | None:
        """A COCO folder's category id of each label (``category_ids[label]``, for pycocotools' ``loadRes``)."""
        shards = self.shards
        return None if shards.mixture else coco_category_ids(shards.manifest, shards.manifest.classes)
