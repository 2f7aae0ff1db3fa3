"""normalize=True on the CPU device: each image normalised on its decode thread into a pooled float batch.

The values must be bit-identical to the uint8 batch normalised by ``Normalize`` (what the device stage did
before, and still does on a GPU), in both layouts, for classification and pair batches; a batch the user
keeps must never be overwritten by the pool.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dataio import ImageLoader
from dataio.augment import host_normalize
from dataio.augment.chain import Normalize
from dataio.augment.host_normalize import HostNormalize
from dataio.images.config import IMAGENET_MEAN, IMAGENET_STD
from dataio.images.contract import check_batch

OPENAI_MEAN, OPENAI_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)


def _torch_normalised(images: np.ndarray, mean, std) -> torch.Tensor:
    """(N, S, S, 3) uint8 through ``Normalize``, as NCHW float."""
    return Normalize(mean, std)(torch.from_numpy(images).permute(0, 3, 1, 2), torch.contiguous_format)


@pytest.mark.parametrize("planar", [False, True])
@pytest.mark.parametrize("kernel", [True, False])
@pytest.mark.parametrize("size", [1, 5, 17, 64])  # 17: a tail after the kernel's 16-pixel steps
def test_one_image_is_normalised_bit_identically_to_normalize(planar, kernel, size, monkeypatch):
    if kernel and not host_normalize.AVAILABLE:
        pytest.fail(host_normalize.WITHOUT_KERNEL)
    if not kernel:
        monkeypatch.setattr(host_normalize, "_normalize_cpu", None)
    rng = np.random.default_rng(size)
    images = rng.integers(0, 256, (2, size, size, 3), dtype=np.uint8)
    images[0, 0, 0] = (0, 255, 128)
    normalize = HostNormalize(OPENAI_MEAN, OPENAI_STD, planar=planar)
    slots = np.full((2, *normalize.slot_shape(size)), np.nan, dtype=np.float32)
    for image, slot in zip(images, slots, strict=True):
        normalize(image, slot)
    got = torch.from_numpy(slots) if planar else torch.from_numpy(slots).permute(0, 3, 1, 2)
    assert torch.equal(got, _torch_normalised(images, OPENAI_MEAN, OPENAI_STD))


def test_a_slot_of_another_shape_is_refused():
    normalize = HostNormalize(OPENAI_MEAN, OPENAI_STD, planar=True)
    with pytest.raises(ValueError, match="does not fit"):
        normalize(np.zeros((8, 8, 3), np.uint8), np.zeros((8, 8, 3), np.float32))


@pytest.mark.parametrize("kernel", [True, False])
@pytest.mark.parametrize("image_dtype, slot_dtype", [(np.uint8, np.int32), (np.uint8, np.float64),
                                                     (np.float32, np.float32), (np.int16, np.float32)])
def test_an_image_or_slot_of_another_dtype_is_refused_by_the_kernel_and_numpy_alike(image_dtype, slot_dtype, kernel,
                                                                                   monkeypatch):
    """The C kernel took any 4-byte slot (an int32 one got float bit patterns, silently) where numpy raised, and
    numpy normalised a float image the kernel refused: both now refuse what is not uint8 into float32."""
    if not kernel:
        monkeypatch.setattr(host_normalize, "_normalize_cpu", None)
    normalize = HostNormalize(OPENAI_MEAN, OPENAI_STD, planar=False)
    slot = np.zeros((4, 4, 3), slot_dtype)
    with pytest.raises(ValueError, match="uint8 image into a float32 slot"):
        normalize(np.full((4, 4, 3), 200, image_dtype), slot)
    assert not slot.any()


@pytest.mark.parametrize("channels_last", [True, False])
@pytest.mark.parametrize("train", [True, False])
def test_loader_batches_equal_the_uint8_batches_normalised(real_photo_shards, channels_last, train):
    kwargs = dict(batch_size=8, image_size=48, train=train, seed=3, num_workers=2, channels_last=channels_last)
    normalised = ImageLoader(real_photo_shards, normalize=True, mean=OPENAI_MEAN, std=OPENAI_STD, **kwargs)
    raw = ImageLoader(real_photo_shards, **kwargs)
    assert normalised.source.host_normalize is not None and normalised._transfer.normalize is None
    batches = 0
    for (images, labels), (pixels, raw_labels) in zip(normalised, raw, strict=True):
        check_batch(images, labels, normalised.config)
        assert images.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
        assert torch.equal(labels, raw_labels)
        assert torch.equal(images, Normalize(OPENAI_MEAN, OPENAI_STD)(pixels.contiguous(), torch.contiguous_format))
        batches += 1
    assert batches == len(raw) > 1


def test_a_kept_batch_is_not_overwritten_by_later_ones(real_photo_shards):
    loader = ImageLoader(real_photo_shards, batch_size=1, image_size=32, normalize=True, num_workers=2)
    kept = [images for images, _ in loader]  # every batch held: the pool must hand out fresh memory
    copies = [images.clone() for images, _ in ImageLoader(real_photo_shards, batch_size=1, image_size=32,
                                                          normalize=True, num_workers=2)]
    assert len({images.data_ptr() for images in kept}) == len(kept) > 8
    for held, copy in zip(kept, copies, strict=True):
        assert torch.equal(held, copy)
    del kept, copies
    again = [images.data_ptr() for images, _ in loader]  # batches dropped as they go: buffers come back
    assert len(set(again)) < len(again)


def test_device_augmentation_keeps_uint8_batches_for_its_chain(image_shards):
    loader = ImageLoader(image_shards, batch_size=8, image_size=32, normalize=True, crop_on_device=True)
    assert loader.source.host_normalize is None and loader._transfer.normalize is not None


def test_pair_batches_are_normalised_on_the_decode_threads_too(pair_tars):
    kwargs = dict(batch_size=8, image_size=40, seed=1, num_workers=2, mean=OPENAI_MEAN, std=OPENAI_STD)
    normalised = ImageLoader(pair_tars, normalize=True, **kwargs)
    raw = ImageLoader(pair_tars, **kwargs)
    assert normalised.source.host_normalize is not None
    for batch, raw_batch in zip(normalised, raw, strict=True):
        assert torch.equal(batch["sample_ids"], raw_batch["sample_ids"])
        expected = Normalize(OPENAI_MEAN, OPENAI_STD)(raw_batch["image"], torch.channels_last)
        assert torch.equal(batch["image"], expected) and batch["image"].is_contiguous(memory_format=torch.channels_last)
    assert normalised.stats.stages.seconds(0).get("normalize", 0) > 0  # a stage of its own, on the decode threads


@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_image_a_transform_keeps_is_not_overwritten_by_the_next_decode(real_photo_shards, num_workers):
    """``transform=`` gets a view of the decoded image: one it keeps (samples stashed to look at later) must keep
    its pixels, as it does with uint8 batches (there the view holds the pooled batch), not show the thread's
    next decode. The batches stay the kept images normalised."""
    kept: dict[int, torch.Tensor] = {}

    def stash(image: torch.Tensor) -> torch.Tensor:
        kept[len(kept)] = image  # dict insertion under the GIL: safe from two decode threads
        return image.bitwise_not_()

    kwargs = dict(batch_size=4, image_size=32, train=False, num_workers=num_workers)
    normalised = ImageLoader(real_photo_shards, normalize=True, transform=stash, **kwargs)
    assert normalised.source.host_normalize is not None
    batches = [images.clone() for images, _ in normalised]
    plain = torch.cat([images for images, _ in ImageLoader(real_photo_shards, transform=torch.bitwise_not, **kwargs)])
    assert len(kept) == len(plain) == 14
    expected = sorted(image.numpy().tobytes() for image in plain)  # decode threads finish in any order
    assert sorted(image.numpy().tobytes() for image in kept.values()) == expected
    assert torch.equal(torch.cat(batches), Normalize(IMAGENET_MEAN, IMAGENET_STD)(plain, torch.channels_last))


def test_close_lets_go_of_the_pooled_batches_but_not_of_a_held_one(real_photo_shards):
    loader = ImageLoader(real_photo_shards, batch_size=4, image_size=32, normalize=True, num_workers=2)
    held = None
    for held, _ in loader:
        pass
    copy = held.clone()
    assert loader.source.buffers._arrays
    loader.close()
    assert loader.source.buffers._arrays == [] and torch.equal(held, copy)
