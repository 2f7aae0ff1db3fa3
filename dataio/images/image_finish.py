"""The images of a batch finished on the device (timm's PrefetchLoader), and classification's finish.

After the copy (``pipeline.device_stage``), the NHWC uint8 images are viewed
as NCHW (channels_last memory) and go through the device augmentation chain
(``augment.DeviceAugment``: the device crop, RandAugment, MixUp/CutMix),
re-seeded for each batch from its ``SeedKey``, or are normalised and laid
out as ``dataio.images.contract`` says. On the CPU a ``normalize=True``
batch comes already normalised from the decode threads
(``augment.host_normalize``): the finish only lays it out. Classification's
finish yields ``(images, labels)``; the other image kinds finish their
images here too and add their own fields (``dataio.formats.kinds``).
"""

from __future__ import annotations

from typing import Any

import torch

from dataio.augment.chain import CropBoxes, DeviceAugment, EpochSizedCrop, Normalize
from dataio.images.config import ImageLoaderConfig
from dataio.images.contract import ImageBatch
from dataio.images.sample_transform import check_batch_output
from dataio.pipeline.hook_sizes import check_rows
from dataio.pipeline.host_batch import HostBatch

CROP_FIELDS = frozenset({"crop_boxes", "crop_flips"})  # crop_on_device: drawn on the host, read there by the chain


class ImageFinish:
    """Images (N, H, W, 3) on the device to the contract's (N, 3, S, S): the chain, normalisation, layout."""

    def __init__(self, config: ImageLoaderConfig, *, normalized_on_host: bool = False) -> None:
        c = config
        self.normalize = Normalize(c.mean, c.std) if c.normalize and not normalized_on_host else None
        self.channels_last = c.channels_last
        self.augment = None
        if c.device_augments:
            crop = None
            if c.crop_on_device:  # sizes come from the schedule per epoch; the boxes from the batch's crop fields
                crop = EpochSizedCrop(c.image_size, schedule=c.schedule, scale=c.crop_scale, ratio=c.crop_ratio,
                                      hflip=c.hflip)
            self.augment = DeviceAugment(crop=crop, randaugment=c.randaugment, mix=c.mix, normalize=self.normalize,
                                         channels_last=c.channels_last, color_jitter=c.jitter, erasing=c.erasing)

    def images(self, images: torch.Tensor, labels: torch.Tensor | None,
               host: HostBatch) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``images`` (NHWC on the device) finished; ``labels`` as the chain leaves them (MixUp's soft targets),
        None for a kind without labels."""
        images = images.permute(0, 3, 1, 2)  # NCHW view of NHWC memory: channels_last
        if self.augment is not None:
            self.augment.seed_for(host.key)
            crops = host.fields.get("crop_boxes")
            if crops is not None:  # crop_on_device: the host-drawn boxes in decoded pixels, and the flips
                crops = CropBoxes(boxes=crops, flipped=host.fields["crop_flips"])
            return self.augment(images, labels, crops)
        memory_format = torch.channels_last if self.channels_last else torch.contiguous_format
        if self.normalize is not None:  # NCHW made in the float conversion's pass, not by a copy after it
            images = self.normalize(images, memory_format)
        return images.contiguous(memory_format=memory_format), labels


class ClassFinish:
    """Classification's finish: ``(images, labels)``, the images as ``ImageFinish`` leaves them."""

    stage = "augment"

    def __init__(self, config: ImageLoaderConfig, options: Any, source: Any) -> None:
        self.image = ImageFinish(config, normalized_on_host=source.host_normalize is not None)

    @property
    def normalize(self) -> Normalize | None:
        """The device's normalisation (None when the decode threads normalise, or for uint8 output)."""
        return self.image.normalize

    @property
    def augment(self) -> DeviceAugment | None:
        """The device augmentation chain, when training asks for one."""
        return self.image.augment

    def fields(self, host: HostBatch) -> dict[str, Any]:
        return {"image": host.fields["image"], "label": host.fields["label"]}

    def __call__(self, moved: dict[str, Any], host: HostBatch) -> tuple[torch.Tensor, torch.Tensor]:
        images, labels = self.image.images(moved["image"], moved["label"], host)
        assert labels is not None
        return images, labels

    def with_ids(self, out: tuple[torch.Tensor, torch.Tensor], host: HostBatch) -> ImageBatch:
        """The batch with its sample ids and padding flags (``ImageLoader.batches()``)."""
        return ImageBatch(out[0], out[1], host.samples, host.repeated)

    def checked(self, out: Any, rows: int, given: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``batch_transform(images, labels)``'s result: two tensors keeping the batch's rows (``hook_sizes``)."""
        images, labels = check_batch_output(out)
        check_rows("batch_transform", {"images": images, "labels": labels}, rows, "samples")
        return images, labels
