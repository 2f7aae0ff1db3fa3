"""``ShardDataset[i]`` of an image-text pair folder: a dict, ``image`` as classification's item decodes it, its
``caption`` and ``key`` (strings, which torch's ``default_collate`` gathers into lists) and, where the folder stores
ids, ``input_ids``: a ``(max_length,)`` int64 tensor (77 by default, the loader's ``CaptionConfig``), cut keeping
the EOS last and padded with the folder's pad id, as open_clip's ``tokenize`` gives each caption, so that
``default_collate`` stacks them. ``transform`` takes the image, ``target_transform`` the caption (as torchvision's
``CocoCaptions``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from dataio.images.image_item import ClassItem
from dataio.pairs.caption_batches import cut_rows
from dataio.pairs.caption_config import CaptionConfig
from dataio.pairs.caption_data import caption_of, ids_of


class PairItem(ClassItem):
    """An image-text pair's item."""

    kind = "pairs"

    def __call__(self, index: int) -> Any:
        text: dict[str, Any] = {"caption": caption_of(self.reader, index), "key": self.reader.table.key(index)}
        stored = ids_of(self.reader, index)
        if stored is not None:
            text["input_ids"] = self.row(*stored)
        return self.image(index), text

    def row(self, ids: list[int], record: dict[str, Any]) -> torch.Tensor:
        """The stored ``ids`` as one fixed-width row: a batch's rows must stack, and open_clip's items are
        ``context_length`` wide (its ``tokenize`` pads every caption to 77)."""
        options = self.options if isinstance(self.options, CaptionConfig) else CaptionConfig()
        fixed = CaptionConfig(max_length=options.max_length, pad_to_max_length=options.max_length is not None)
        pad_id, eos_id = int(record["pad_id"]), record["eos_id"]
        padded = np.array([ids], dtype=np.int64).reshape(1, len(ids))
        mask = np.ones_like(padded)
        last = None if eos_id is None else np.array([int(eos_id)], dtype=np.int64)
        cut, _ = cut_rows(padded, mask, np.array([len(ids)], dtype=np.int64), fixed, pad_id, last)
        return torch.from_numpy(cut[0].copy())

    def transformed(self, sample: Any, dataset: Any) -> dict[str, Any]:
        image, text = sample
        caption = text["caption"] if dataset.target_transform is None else dataset.target_transform(text["caption"])
        return {"image": dataset.transformed_image(image), **text, "caption": caption}
