"""Move uint8 batches to the target device and normalise there (timm's PrefetchLoader).

On CUDA the host batch is pinned, copied on a side stream with
``non_blocking=True`` while the previous batch is being used
(``dataio.pipeline.device_copy``), and converted to float and normalised on
the GPU. On the CPU the batch is used in place, and a ``normalize=True`` batch
comes already normalised from the decode threads (``augment.host_normalize``). Both
give the layout of ``dataio.images.contract``. With device augmentation, the
``dataio.augment.DeviceAugment`` chain runs on the same side stream after the copy,
re-seeded for each batch from its ``SeedKey``. The user's ``batch_transform``
runs last, on the device (on the side stream too), timed as ``batch_transform``;
one with a ``generator`` parameter gets a generator on the device seeded from
the batch's ``SeedKey``, so its draws are the same on every run and resume.
"""

from __future__ import annotations

import torch

from dataio.augment.chain import CropBoxes, DeviceAugment, EpochSizedCrop, Normalize
from dataio.augment.seeding import derive_seed
from dataio.images.config import ImageLoaderConfig
from dataio.images.sample_transform import check_batch_output, takes_generator
from dataio.pipeline.host_batch import HostBatch
from dataio.pipeline.stage_times import StageTimes
from dataio.pipeline.hook_sizes import check_rows


BATCH_TRANSFORM_STREAM = 4  # augment.seeding streams: 1 RandAugment, 2 mix, 3 crop


class DeviceTransfer:
    """Turns host ``(images NHWC uint8, labels int64)`` into the contract's device tensors."""

    def __init__(self, config: ImageLoaderConfig, augment: DeviceAugment | None = None,
                 normalize: Normalize | None = None, times: StageTimes | None = None) -> None:
        self.augment = augment
        self.device = torch.device(config.device)
        self.normalize = normalize  # the loader's one Normalize, shared with ``augment``
        self.channels_last = config.channels_last
        self.times = times or StageTimes()  # "copy" (host to device) and "augment" (everything after it)
        self.batch_transform = config.batch_transform
        self._seeded = self.batch_transform is not None and takes_generator(self.batch_transform)
        self._generator = torch.Generator(device=self.device) if self._seeded else None

    def _finish(self, images: torch.Tensor, labels: torch.Tensor, batch: HostBatch) -> tuple[torch.Tensor, torch.Tensor]:
        images = images.permute(0, 3, 1, 2)  # NCHW view of NHWC memory: channels_last
        if self.augment is not None and len(labels):  # an empty batch (all skipped) is dropped anyway
            self.augment.seed_for(batch.key)
            crops = batch.fields.get("crop_boxes")
            if crops is not None:  # crop_on_device: the host-drawn boxes in decoded pixels, and the flips
                crops = CropBoxes(boxes=crops, flipped=batch.fields["crop_flips"])
            return self.augment(images, labels, crops)
        memory_format = torch.channels_last if self.channels_last else torch.contiguous_format
        if self.normalize is not None:  # NCHW made in the float conversion's pass, not by a copy after it
            images = self.normalize(images, memory_format)
        return images.contiguous(memory_format=memory_format), labels

    def _user(self, images: torch.Tensor, labels: torch.Tensor, batch: HostBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """``batch_transform(images, labels)``, with a generator seeded for this batch when it takes one; what it
        returns must keep the batch's size (``hook_sizes``)."""
        if self._generator is None:
            out = check_batch_output(self.batch_transform(images, labels))
        else:
            self._generator.manual_seed(derive_seed(batch.key, BATCH_TRANSFORM_STREAM))
            out = check_batch_output(self.batch_transform(images, labels, generator=self._generator))
        check_rows("batch_transform", {"images": out[0], "labels": out[1]}, len(labels), "samples")
        return out

    def __call__(self, batch: HostBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch's ``image`` and ``label`` fields on the device, finished, then through ``batch_transform``."""
        with self.times.range("copy", self.device):
            images = batch.fields["image"].to(self.device, non_blocking=True)
            labels = batch.fields["label"].to(self.device, non_blocking=True)
        with self.times.range("augment", self.device):
            images, labels = self._finish(images, labels, batch)
        if self.batch_transform is None or not len(labels):  # an empty batch (all skipped) is dropped anyway
            return images, labels
        with self.times.range("batch_transform", self.device):
            return self._user(images, labels, batch)


def device_stage(config: ImageLoaderConfig, times: StageTimes, *, normalized_on_host: bool = False) -> DeviceTransfer:
    """The loader's device stage: normalisation (unless the decode threads did it: ``normalized_on_host``, the
    source's ``host_normalize``), and the device augmentation chain when training asks for one."""
    c = config
    normalize = Normalize(c.mean, c.std) if c.normalize and not normalized_on_host else None
    augment = None
    if c.device_augments:
        crop = None
        if c.crop_on_device:  # sizes come from the schedule per epoch; the boxes from the batch's crop fields
            crop = EpochSizedCrop(c.image_size, schedule=c.schedule, scale=c.crop_scale, ratio=c.crop_ratio,
                                  hflip=c.hflip)
        augment = DeviceAugment(crop=crop, randaugment=c.randaugment, mix=c.mix, normalize=normalize,
                                channels_last=c.channels_last)
    return DeviceTransfer(c, augment, normalize, times)
