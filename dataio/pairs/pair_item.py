"""``ShardDataset[i]`` of an image-text pair folder: a dict, ``image`` as classification's item decodes it, its
``caption`` and ``key`` (strings, which torch's ``default_collate`` gathers into lists); ``transform`` takes the
image, ``target_transform`` the caption (as torchvision's ``CocoCaptions``)."""

from __future__ import annotations

from typing import Any

from dataio.images.image_item import ClassItem
from dataio.pairs.caption_data import caption_of


class PairItem(ClassItem):
    """An image-text pair's item."""

    kind = "pairs"

    def __call__(self, index: int) -> Any:
        return self.image(index), {"caption": caption_of(self.reader, index), "key": self.reader.table.key(index)}

    def transformed(self, sample: Any, dataset: Any) -> dict[str, Any]:
        image, text = sample
        caption = text["caption"] if dataset.target_transform is None else dataset.target_transform(text["caption"])
        return {"image": dataset.transformed_image(image), "caption": caption, "key": text["key"]}
