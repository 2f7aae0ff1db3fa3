"""``ShardDataset[i]`` by kind: classification's ``(image, label)``, and the image every image kind's item holds.

Each kind's map-style item (``dataio.formats.kinds``) reads one sample through ``ImageShards`` (checked against its
checksum) and decodes it: the whole image as a uint8 ``(3, H, W)`` tensor (what torchvision v2 transforms take)
or a PIL image (``to_pil``), or, with ``image_size``, the loader's evaluation view (the same centre box and the same
decode into an ``(S, S, 3)`` buffer as ``ImageLoader(train=False)``), normalised with ``normalize``. Then the
data set's transforms apply as the kind says (``transformed``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from PIL import Image

from dataio.augment import Normalize, crop_boxes
from dataio.formats.errors import ConfigError
from dataio.formats.kinds import kind_of
from dataio.images.image_shards import ImageShards
from dataio.images.turbo_decode import decode_crop_into, decode_image


class ClassItem:
    """Classification's item: ``(image, label)``; ``transform`` takes the image, ``target_transform`` the label."""

    takes_target_transform = True  # a label of its own (a sample with boxes is one dict instead)
    kind = "classification"  # the kind whose loader reads the data set as its items are (dataio.DataLoader)

    def __init__(self, reader: ImageShards, config: Any, options: Any) -> None:
        if isinstance(config.image_size, (tuple, list)):  # the loader's square eval view: box folders take (H, W)
            raise ConfigError(f"{{0}} {tuple(config.image_size)} (height, width) is for box folders: the eval view "
                              f"of {kind_of(reader.manifest).what} is square; pass one int", "image_size")
        self.reader, self.config, self.options = reader, config, options
        self.normalize = Normalize(config.mean, config.std) if config.normalize else None

    def image(self, index: int) -> Any:
        """Sample ``index``'s image read (checked against its checksum) and decoded, as the module docstring says;
        raises data errors (ValueError, OSError)."""
        c, reader = self.config, self.reader
        data = reader.read(index)
        if c.image_size is None:
            pixels = decode_image(data, to_pil=c.to_pil)
        else:  # the loader's val path: the same boxes and the same decode into an (S, S, 3) buffer
            rows = slice(index, index + 1)
            box = crop_boxes.center_crop_boxes(reader.table.width[rows], reader.table.height[rows], c.val_crop_ratio)[0]
            pixels = np.empty((c.image_size, c.image_size, 3), dtype=np.uint8)
            decode_crop_into(data, box, False, pixels, fast_resize=c.fast_resize, reduced_decode=c.reduced_decode,
                             region_decode=c.region_decode)
            if c.to_pil:
                pixels = Image.fromarray(pixels)
        if c.to_pil:
            return pixels
        image = torch.from_numpy(pixels).permute(2, 0, 1)  # CHW view of the decoded HWC pixels
        return self.normalize(image[None])[0] if self.normalize is not None else image

    def __call__(self, index: int) -> Any:
        labels = self.reader.table.label
        return self.image(index), -1 if labels is None else int(labels[index])  # -1: images alone (views)

    def transformed(self, sample: Any, dataset: Any) -> Any:
        """``sample`` through the data set's ``transform`` (the image) and ``target_transform`` (the label)."""
        image, label = sample
        image = dataset.transformed_image(image)
        if dataset.target_transform is not None:
            label = dataset.target_transform(label)
        return image, label
