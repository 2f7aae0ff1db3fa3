"""ImageLoader with device augmentation: RandAugment, MixUp/CutMix, device crop, resolution schedule."""

from __future__ import annotations

import pytest
import torch

from dataio.augment import MixConfig, RandAugmentConfig, ResolutionSchedule
from dataio import ImageLoader
from dataio.images.contract import check_batch
from tests.conftest import NUM_COLOURED, index_of


def augmented(shards, **options) -> ImageLoader:
    base = dict(batch_size=8, image_size=48, num_workers=2, seed=3, randaugment=RandAugmentConfig(),
                mix=MixConfig(num_classes=3), normalize=True)
    return ImageLoader(shards, **{**base, **options})


def test_contract_with_randaugment_and_mix(image_shards):
    loader = augmented(image_shards)
    batches = list(loader)
    for images, targets in batches:
        check_batch(images, targets, loader.config)
    assert sum(len(t) for _, t in batches) == loader.manifest.num_samples


def test_augmented_epochs_are_deterministic_and_resume_exactly(image_shards):
    first = [(i.clone(), t.clone()) for i, t in augmented(image_shards)]
    again = [(i.clone(), t.clone()) for i, t in augmented(image_shards)]
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(first, again, strict=True))
    interrupted = augmented(image_shards)
    iterator = iter(interrupted)
    next(iterator), next(iterator)
    state = interrupted.state_dict()
    resumed = augmented(image_shards)
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert len(rest) == len(first) - 2
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(first[2:], rest, strict=True))


def test_epochs_and_ranks_augment_differently(image_shards):
    loader = augmented(image_shards, shuffle=False)
    epoch0 = next(iter(loader))[0]
    loader.set_epoch(1)
    epoch1 = next(iter(loader))[0]
    assert not torch.equal(epoch0, epoch1)


def test_crop_on_device_keeps_every_sample_once(coloured_shards):
    loader = ImageLoader(coloured_shards, batch_size=8, image_size=32, crop_on_device=True, num_workers=2)
    seen = []
    for images, labels in loader:
        check_batch(images, labels, loader.config)
        seen += [index_of(image.numpy()) for image in images]
        assert [i % 3 for i in seen[-len(labels):]] == labels.tolist()
    assert sorted(seen) == list(range(NUM_COLOURED))


def test_crop_on_device_matches_host_crop(image_shards):
    options = dict(batch_size=12, image_size=64, seed=5, shuffle=False, num_workers=2)
    host = next(iter(ImageLoader(image_shards, **options)))[0].float()
    device = next(iter(ImageLoader(image_shards, crop_on_device=True, **options)))[0].float()
    assert host.shape == device.shape
    difference = (host - device).abs().mean()
    assert difference < 12, f"device crop differs from the host crop by {difference:.1f} levels on average"


def test_schedule_changes_size_and_batch_per_epoch(coloured_shards):
    schedule = ResolutionSchedule(epochs=3, start_size=32, end_size=64, ramp_start=0, ramp_end=2, batch_size=8,
                                  dynamic_batch=True)
    loader = ImageLoader(coloured_shards, schedule=schedule, num_workers=2)
    pool = loader._pool
    plan = []
    for epoch in range(3):
        assert loader.epoch == epoch
        batches = list(loader)
        for images, labels in batches:
            check_batch(images, labels, loader.config, epoch=epoch)
        plan.append((batches[0][0].shape[-1], len(batches[0][1]), len(batches)))
        assert sum(len(labels) for _, labels in batches) == NUM_COLOURED
    assert plan == [(32, 32, 2), (64, 8, 6), (64, 8, 6)]
    assert loader._pool is pool  # no rebuild between resolutions


def test_augmentation_is_for_training_loaders(image_shards):
    with pytest.raises(ValueError, match="train=True"):
        ImageLoader(image_shards, train=False, randaugment=RandAugmentConfig())


def test_device_crop_then_randaugment_takes_the_cpu_kernel(image_shards, monkeypatch):
    """On the CPU the device crop's floats are rounded to uint8 so RandAugment runs its C kernel."""
    from dataio.augment import cpu_kernel

    if not cpu_kernel.AVAILABLE:
        pytest.skip("dataio.augment._randaugment_cpu not built")
    calls = []
    original = cpu_kernel.apply
    monkeypatch.setattr(cpu_kernel, "apply", lambda *a, **k: calls.append(1) or original(*a, **k))
    first = [(i.clone(), t.clone()) for i, t in augmented(image_shards, crop_on_device=True)]
    again = [(i.clone(), t.clone()) for i, t in augmented(image_shards, crop_on_device=True)]
    assert len(calls) == 2 * len(first) > 0
    for (images, targets), (images2, targets2) in zip(first, again, strict=True):
        assert images.shape[1:] == (3, 48, 48) and images.dtype == torch.float32
        assert torch.equal(images, images2) and torch.equal(targets, targets2)
