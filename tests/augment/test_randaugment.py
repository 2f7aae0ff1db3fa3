"""RandAugment over a batch: per-sample choices, equivalence to per-image application, seeding, no host sync."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from dataio.augment import OPS, RandAugment, RandAugmentConfig, SeedKey
from dataio.augment import geometry_ops
from dataio.augment.randaugment import geometric_maps, photometric
from tests.augment.helpers import photo_batch


def apply_one_by_one(image: torch.Tensor, ops, magnitude, sign, fill: float = 128.0) -> torch.Tensor:
    """The same ops applied to one image at a time: the per-image loop the batch version replaces."""
    x = image[None].float()
    _, _, height, width = x.shape
    for op, m, s in zip(ops.tolist(), magnitude, sign, strict=True):
        name = OPS[op]
        if name == "Identity":
            continue
        if op >= 9:
            maps = geometric_maps(torch.tensor([op - 9]), m.view(1), s.view(1), height, width)
            x = geometry_ops.warp(x, geometry_ops.forward_matrices(maps), fill)
        else:
            x = photometric(name, x.clone(), m.view(1), s.view(1))
    return x[0]


def test_batch_equals_per_image_application() -> None:
    images = photo_batch(40, size=(48, 64))
    # the torch-ops path (what runs on a GPU); the CPU kernel is tested against PIL in test_randaugment_kernel
    ra = RandAugment(RandAugmentConfig(num_ops=3, magnitude=8, magnitude_std=1.0, output="float", cpu_kernel=False))
    key = SeedKey(seed=5, epoch=1, rank=0, step=3)
    ra.seed_for(key)
    batch = ra(images)
    ra.seed_for(key)
    ops, magnitude, sign = ra.draw(len(images))
    for i in range(len(images)):
        expected = apply_one_by_one(images[i], ops[i], magnitude[i], sign[i])
        torch.testing.assert_close(batch[i], expected, atol=1e-3, rtol=0, msg=f"sample {i}, ops {ops[i].tolist()}")


def test_each_sample_draws_its_own_ops_uniformly() -> None:
    ra = RandAugment(RandAugmentConfig(num_ops=2))
    ra.seed_for(SeedKey(seed=0))
    ops, magnitude, sign = ra.draw(256)
    assert ops.shape == (256, 2)
    assert len({tuple(row) for row in ops.tolist()}) > 100  # choices differ across samples
    counts = np.bincount(ops.flatten().numpy(), minlength=len(OPS))
    expected = ops.numel() / len(OPS)
    chi_square = float(((counts - expected) ** 2 / expected).sum())
    assert chi_square < 34.5, f"op frequencies {counts.tolist()} not uniform (chi2 {chi_square:.1f}, 13 dof, p=0.001)"
    assert set(sign.flatten().tolist()) == {-1.0, 1.0}


def test_same_image_gets_different_augmentations() -> None:
    image = photo_batch(1, size=(32, 32))
    out = RandAugment(RandAugmentConfig(num_ops=2, magnitude=9))(image.repeat(64, 1, 1, 1))
    distinct = {bytes(sample.numpy().tobytes()) for sample in out}
    assert len(distinct) > 40


def test_seeding_is_deterministic_and_varies_with_rank_and_epoch() -> None:
    images = photo_batch(16, size=(32, 32))
    ra = RandAugment(RandAugmentConfig())

    def run(**key: int) -> torch.Tensor:
        ra.seed_for(SeedKey(**key))
        return ra(images)

    assert torch.equal(run(seed=1, epoch=2, rank=0), run(seed=1, epoch=2, rank=0))
    assert not torch.equal(run(seed=1, epoch=2, rank=0), run(seed=1, epoch=2, rank=1))
    assert not torch.equal(run(seed=1, epoch=2, rank=0), run(seed=1, epoch=3, rank=0))
    assert not torch.equal(run(seed=1, epoch=2, rank=0), run(seed=2, epoch=2, rank=0))
    assert ra.get_state() == {"seed": 2, "epoch": 2, "rank": 0, "step": 0}


def test_magnitude_noise_stays_in_range() -> None:
    ra = RandAugment(RandAugmentConfig(magnitude=9, magnitude_std=2.0))
    _, magnitude, _ = ra.draw(1000)
    assert magnitude.min() >= 0 and magnitude.max() <= 10 and magnitude.std() > 0.5


def test_layout_and_dtypes() -> None:
    images = photo_batch(8, size=(32, 32)).contiguous(memory_format=torch.channels_last)
    out = RandAugment(RandAugmentConfig())(images)
    assert out.dtype == torch.uint8 and out.shape == images.shape
    assert out.is_contiguous(memory_format=torch.channels_last)
    floats = RandAugment(RandAugmentConfig(output="float"))(images.contiguous())
    assert floats.dtype == torch.float32 and floats.is_contiguous() and 0 <= floats.min() and floats.max() <= 255


def test_no_host_synchronisation() -> None:
    """On the meta device a tensor has no values: any .item(), bool() or .tolist() of one raises."""
    images = torch.empty(32, 3, 24, 24, dtype=torch.uint8, device="meta")
    out = RandAugment(RandAugmentConfig(num_ops=3))(images)
    assert out.device.type == "meta" and out.shape == images.shape


@pytest.mark.parametrize("bad", [{"num_ops": -1}, {"magnitude": 11}, {"ops": ("Blur",)}, {"output": "half"}])
def test_config_validation(bad: dict) -> None:
    with pytest.raises(ValueError):
        dataclasses.replace(RandAugmentConfig(), **bad)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_matches_cpu() -> None:
    images = photo_batch(32, size=(64, 64))
    ra = RandAugment(RandAugmentConfig(output="float", cpu_kernel=False))  # the same torch ops on both devices
    ra.seed_for(SeedKey(seed=3))
    on_cpu = ra(images)
    ra.seed_for(SeedKey(seed=3))
    on_gpu = ra(images.cuda()).cpu()
    assert (on_gpu - on_cpu).abs().mean() < 0.05
