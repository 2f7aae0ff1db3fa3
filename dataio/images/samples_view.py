"""``ImageLoader.dataset``: the shards seen as torchvision's ``ImageFolder`` (len, classes, targets, indexing).

Scripts log ``len(train_loader.dataset)`` and read ``dataset.classes``;
some index a sample to look at it. ``dataset[i]`` decodes sample ``i`` whole
(the bytes checked against the sample table, as every read) into a uint8
CHW tensor, with its label.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import torch
from PIL import Image

from dataio.formats.limits import MAX_PIXELS
from dataio.formats.sample_table import SampleTable


class ImageSamples:
    """Samples of an image shard folder, in sample-table order (the ids ``ImageBatch.samples`` holds)."""

    def __init__(self, table: SampleTable, classes: tuple[str, ...], read: Callable[[int], bytes]) -> None:
        self._table, self.classes, self._read = table, classes, read

    def __len__(self) -> int:
        return len(self._table)

    @property
    def class_to_idx(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.classes)}

    @property
    def targets(self) -> list[int]:
        """The label of every sample (as ``ImageFolder.targets``)."""
        return self._table.label.astype(np.int64).tolist()

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        """(image as a uint8 (3, H, W) tensor, label) of sample ``index``; IndexError past the end."""
        if not -len(self) <= index < len(self):
            raise IndexError(f"sample {index} is not in 0..{len(self) - 1}")
        index %= len(self)
        with Image.open(io.BytesIO(self._read(index))) as image:
            if image.width * image.height > MAX_PIXELS:
                raise ValueError(f"sample {index}: {image.width}x{image.height} pixels is past the limit")
            pixels = np.asarray(image.convert("RGB"))
        return torch.from_numpy(pixels.copy()).permute(2, 0, 1), int(self._table.label[index])
