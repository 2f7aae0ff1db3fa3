"""The C kernel behind RandAugment on uint8 CPU batches (dataio.augment.cpu_kernel) against PIL itself.

The kernel follows PIL's arithmetic op by op, so the tolerances are tight:
- a single op matches PIL exactly on at least 99% of values and by 1 level everywhere.
  The 1-level differences come from affine sampling in float32 where PIL uses double,
  and from pillow-simd's L conversion.
- a chain of ops can carry such a 1-level difference through a stretching op
  (Equalize, AutoContrast, a Solarize threshold). So whole-batch runs are checked as
  a mean over pixels, plus a bound on the share of pixels off by more than 1.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from dataio.augment import OPS, RandAugment, RandAugmentConfig, SeedKey, cpu_kernel
from dataio.augment.randaugment import kernel_plan
from tests.augment.helpers import from_pil, photo_batch, pil_op, to_pil

pytestmark = pytest.mark.skipif(not cpu_kernel.AVAILABLE, reason="dataio.augment._randaugment_cpu not built")


def kernel_single_op(images: torch.Tensor, name: str, magnitude: float, sign: float) -> torch.Tensor:
    n, _, height, width = images.shape
    ops = torch.full((n, 1), OPS.index(name))
    codes, params = kernel_plan(ops, torch.full((n, 1), magnitude), torch.full((n, 1), sign), height, width)
    return cpu_kernel.apply(images, codes, params, fill=128)


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("magnitude,sign", [(3.0, 1.0), (9.0, -1.0), (10.0, 1.0)])
def test_each_op_matches_pil(name: str, magnitude: float, sign: float) -> None:
    images = photo_batch(4, size=(37, 53))  # odd sizes: the row spans and edges of the warps
    ours = kernel_single_op(images, name, magnitude, sign)
    for i in range(len(images)):
        expected = from_pil(pil_op(to_pil(images[i]), name, magnitude, sign))
        diff = (ours[i].int() - expected.int()).abs()
        assert diff.max() <= 1, f"{name} m={magnitude} sample {i}: max diff {diff.max()}"
        assert (diff > 0).float().mean() <= 0.01, f"{name}: {(diff > 0).float().mean():.3%} of values differ"


def test_random_sizes_and_magnitudes_match_pil() -> None:
    """Tiny to odd sizes, every op, random magnitudes: the spans, clamps and fills at the borders."""
    rng = np.random.default_rng(0)
    for trial in range(60):
        height, width = (int(v) for v in rng.integers(3, 40, size=2))
        image = photo_batch(1, size=(height, width), seed=trial)
        name, magnitude, sign = OPS[trial % len(OPS)], float(rng.uniform(0, 10)), float(rng.choice([-1.0, 1.0]))
        ours = kernel_single_op(image, name, magnitude, sign)[0]
        expected = from_pil(pil_op(to_pil(image[0]), name, magnitude, sign))
        assert (ours.int() - expected.int()).abs().max() <= 1, f"{name} m={magnitude:.2f} {sign} on {height}x{width}"


def test_batch_matches_per_image_pil_chain() -> None:
    images = photo_batch(48, size=(48, 64))
    ra = RandAugment(RandAugmentConfig(num_ops=3, magnitude=8, magnitude_std=1.0))
    ra.seed_for(SeedKey(seed=5))
    out = ra(images)
    ra.seed_for(SeedKey(seed=5))
    ops, magnitude, sign = ra.draw(len(images))
    exact = 0
    for i in range(len(images)):
        image = to_pil(images[i])
        for k in range(ops.shape[1]):
            image = pil_op(image, OPS[ops[i, k]], magnitude[i, k], sign[i, k])
        diff = (out[i].int() - from_pil(image).int()).abs()
        exact += int(diff.max() == 0)
        assert diff.float().mean() < 0.05 and (diff > 1).float().mean() < 0.005, f"sample {i}, ops {ops[i].tolist()}"
    assert exact >= len(images) * 3 // 4, f"only {exact} of {len(images)} samples equal PIL's exactly"


def test_kernel_and_torch_paths_apply_the_same_draws() -> None:
    images = photo_batch(32, size=(40, 40))
    config = RandAugmentConfig(num_ops=2, magnitude=9)
    kernel, torch_ops = RandAugment(config), RandAugment(dataclasses.replace(config, cpu_kernel=False))
    kernel.seed_for(SeedKey(seed=2))
    torch_ops.seed_for(SeedKey(seed=2))
    diff = (kernel(images).float() - torch_ops(images).float()).abs()
    assert diff.mean() < 1.0, f"mean diff {diff.mean():.2f}: the two paths disagree on ops or magnitudes"


def test_threads_layouts_and_input_untouched() -> None:
    images = photo_batch(24, size=(32, 48))
    before = images.clone()
    ra = RandAugment(RandAugmentConfig(num_ops=2, magnitude=9))

    def run(batch: torch.Tensor, threads: int) -> torch.Tensor:
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            ra.seed_for(SeedKey(seed=9))
            return ra(batch)
        finally:
            torch.set_num_threads(previous)

    planar_one = run(images, 1)
    channels_last_two = run(images.contiguous(memory_format=torch.channels_last), 2)
    assert torch.equal(planar_one, channels_last_two)
    assert planar_one.is_contiguous() and channels_last_two.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(images, before)
    strided = images[:, :, ::2, ::2]  # neither layout: made channels_last first
    ra.seed_for(SeedKey(seed=9))
    assert ra(strided).shape == strided.shape


def test_float_output_and_fill() -> None:
    images = photo_batch(8, size=(32, 32))
    floats = RandAugment(RandAugmentConfig(output="float"))(images)
    assert floats.dtype == torch.float32 and torch.equal(floats, floats.round())
    black = kernel_single_op(torch.zeros(2, 3, 16, 16, dtype=torch.uint8), "TranslateX", 10.0, 1.0)
    filled = cpu_kernel.apply(torch.zeros(2, 3, 16, 16, dtype=torch.uint8), *kernel_plan(
        torch.full((2, 1), OPS.index("TranslateX")), torch.full((2, 1), 10.0), torch.ones(2, 1), 16, 16), fill=7)
    assert black.max() == 128 and set(filled.unique().tolist()) == {0, 7}


def test_bad_buffers_are_refused() -> None:
    from dataio.augment import _randaugment_cpu

    pixels = np.zeros((2, 8, 8, 3), np.uint8)
    codes, params = np.zeros((2, 1), np.int32), np.zeros((2, 1, 6))
    with pytest.raises(ValueError, match="src and dst"):
        _randaugment_cpu.apply(pixels, np.zeros((2, 8, 8, 2), np.uint8), 2, 8, 8, codes, params, 1, 128, 0, 2)
    with pytest.raises(ValueError, match="codes"):
        _randaugment_cpu.apply(pixels, pixels.copy(), 2, 8, 8, codes[:1], params, 1, 128, 0, 2)
    with pytest.raises(ValueError, match="sample range"):
        _randaugment_cpu.apply(pixels, pixels.copy(), 2, 8, 8, codes, params, 1, 128, 0, 3)


def test_no_ops_empty_batch_and_restricted_op_sets() -> None:
    images = photo_batch(4, size=(16, 16))
    assert torch.equal(RandAugment(RandAugmentConfig(num_ops=0))(images), images)
    assert RandAugment(RandAugmentConfig())(images[:0]).shape == (0, 3, 16, 16)
    for ops in (("Color", "Solarize"), ("Rotate",)):  # no geometric draws / only geometric draws
        ra = RandAugment(RandAugmentConfig(ops=ops, magnitude=9))
        out = ra(images)
        assert out.shape == images.shape and not torch.equal(out, images)


def test_a_forked_child_gets_its_own_threads() -> None:
    """After the parent used the kernel's thread pool, a forked child (a DataLoader worker) must not hang."""
    import multiprocessing

    images = photo_batch(16, size=(24, 24))
    ra = RandAugment(RandAugmentConfig(num_ops=2, magnitude=9))
    previous = torch.get_num_threads()
    torch.set_num_threads(2)  # the parent's pool exists with 2 threads
    try:
        ra(images)
        context = multiprocessing.get_context("fork")
        with context.Pool(1) as pool:
            shape = pool.apply_async(_augment_in_child, (images,)).get(timeout=60)
    finally:
        torch.set_num_threads(previous)
    assert shape == (16, 3, 24, 24)


def _augment_in_child(images: torch.Tensor) -> tuple[int, ...]:
    torch.set_num_threads(2)
    return tuple(RandAugment(RandAugmentConfig(num_ops=2, magnitude=9))(images).shape)


@pytest.mark.parametrize("height,width,coefficients", [
    (3000, 3, (1, 1e6, 0, 0, 1, 0)), (3000, 3, (1, -1e6, -1e6, 0, 1, 0)),  # row shifts past the int range
    (3, 3000, (1, 0, 0, 1e6, 1, 0)), (3, 3000, (1, 0, 0, -1e6, 1, -1e6)),  # column shifts
])
def test_shifts_far_outside_the_image_are_all_fill(height: int, width: int, coefficients: tuple) -> None:
    """The largest coefficients the kernel accepts, on tall or wide images: all fill, no int overflow (make sanitize)."""
    from dataio.augment import _randaugment_cpu

    src = np.random.default_rng(0).integers(0, 256, (1, height, width, 3), dtype=np.uint8)
    dst = np.zeros_like(src)
    _randaugment_cpu.apply(src, dst, 1, height, width, np.array([[9]], np.int32),
                           np.array([[coefficients]], np.float64), 1, 128, 0, 1)
    assert (dst == 128).all()


def test_chain_without_mixing_gives_what_randaugment_then_normalize_give() -> None:
    """DeviceAugment keeps the kernel's output uint8 when nothing mixes after it: same values as the float route."""
    from dataio.augment import DeviceAugment, Normalize
    from dataio.images.config import IMAGENET_MEAN, IMAGENET_STD

    images, labels = photo_batch(12, size=(32, 40)), torch.zeros(12, dtype=torch.long)
    config = RandAugmentConfig(num_ops=2, magnitude=9)
    normalize = Normalize(IMAGENET_MEAN, IMAGENET_STD)
    for chain_normalize in (None, normalize):
        chain = DeviceAugment(randaugment=config, normalize=chain_normalize)
        chain.seed_for(SeedKey(seed=6))
        ours, _ = chain(images, labels)
        ra = RandAugment(dataclasses.replace(config, output="float"))
        ra.seed_for(SeedKey(seed=6))
        floats = ra(images)
        expected = normalize(floats) if chain_normalize else floats.round().to(torch.uint8)
        assert ours.dtype == expected.dtype and torch.equal(ours, expected)
