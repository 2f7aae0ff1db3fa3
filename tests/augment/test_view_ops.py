"""Multi-crop views' photometric ops (dataio.augment.view_ops) against an independent float64 model, and their draws.

The reference computes in float32 and the model (tests/augment/view_model.py) in float64, so:
- the float output (mean 0, std 1: the unrounded values) is within 2e-6 of the model's, except where solarize saw
  a value within 1e-5 of its threshold, where float32 and float64 may fall on either side;
- the uint8 output is the model's ``floor(255 x + 0.5)`` within one level (a value within ~1e-6 of k + 0.5), at
  most 0.1% of values.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from dataio.augment.view_ops import (INV255, ViewParams, ViewRecipe, apply_views, draw_view_params,
                                     solarize_threshold)
from dataio.formats.errors import ConfigError
from tests.augment import view_model
from tests.augment.helpers import photo_batch
from tests.augment.view_model import make_params

UNROUNDED = dict(mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))  # float output = the values themselves


def images_for_ops(n: int = 4, size: tuple[int, int] = (23, 31), seed: int = 0) -> torch.Tensor:
    """Photo-like images, plus one of uniform noise (every value, sharp edges) and one gray (hue's s = 0)."""
    photos = photo_batch(n - 2, size=size, seed=seed)
    noise = torch.from_numpy(np.random.default_rng(seed).integers(0, 256, (1, 3, *size), dtype=np.uint8))
    gray = photos[:1].float().mean(dim=1, keepdim=True).round().to(torch.uint8).expand(1, 3, *size)
    return torch.cat([photos, noise, gray])


def assert_matches_model(images: torch.Tensor, params: ViewParams) -> None:
    got = apply_views(images, params, **UNROUNDED)
    rounded = apply_views(images, params)
    assert got.dtype == torch.float32 and rounded.dtype == torch.uint8
    for i in range(len(images)):
        model = view_model.view(images[i].permute(1, 2, 0).numpy(), params, i)
        values = got[i].permute(1, 2, 0).double().numpy()
        close = np.abs(values - model.values) <= 2e-6
        assert (close | model.near_threshold).all(), (
            f"sample {i}: max error {np.abs(values - model.values)[~model.near_threshold].max():.3g}")
        expected = np.floor(model.values * 255 + 0.5)
        diff = np.abs(rounded[i].permute(1, 2, 0).numpy().astype(int) - expected)
        assert (diff <= 1).all() and (diff > 0).mean() <= 0.001, f"sample {i}: {(diff > 0).mean():.3%} differ"


@pytest.mark.parametrize("op, factor", [(0, 1.37), (0, 0.61), (1, 1.4), (1, 0.6), (2, 1.2), (2, 0.8), (3, 0.1),
                                        (3, -0.1), (3, 0.5), (3, -0.5)])
def test_each_jitter_op_alone_matches_the_model(op: int, factor: float) -> None:
    factors = [1.0, 1.0, 1.0, 0.0]
    factors[op] = factor
    images = images_for_ops()
    assert_matches_model(images, make_params(len(images), jitter=True, factors=tuple(factors)))


@pytest.mark.parametrize("sigma", [0.1, 0.7, 2.0])
@pytest.mark.parametrize("kernel", [9, 3, 1])
def test_blur_alone_matches_the_model(sigma: float, kernel: int) -> None:
    images = images_for_ops()
    assert_matches_model(images, make_params(len(images), blur=True, sigma=sigma, blur_kernel=kernel))


@pytest.mark.parametrize("threshold", [128, 0, 255, 77])
def test_grayscale_and_solarize_alone_match_the_model(threshold: int) -> None:
    images = images_for_ops()
    assert_matches_model(images, make_params(len(images), grayscale=True))
    params = make_params(len(images), solarize=True, solarize_threshold=threshold)
    assert_matches_model(images, params)
    # on uint8 values solarize is exact: every value >= threshold inverted, the rest kept
    expected = torch.where(images >= threshold, 255 - images, images)
    assert torch.equal(apply_views(images, params), expected)


def test_solarize_threshold_is_the_images_own_scale() -> None:
    """128 and 128 / 255 in the images' arithmetic compare equal, so a value of 128 is inverted."""
    assert np.float32(128) * np.float32(INV255) == np.float32(solarize_threshold(128))


def test_random_chains_match_the_model() -> None:
    recipe = ViewRecipe(jitter=0.9, grayscale=0.3, blur=0.6, solarize=0.4, hue=0.5, brightness=0.8)
    images = images_for_ops(12, size=(19, 26), seed=4)
    params = draw_view_params(recipe, len(images), torch.Generator().manual_seed(11))
    assert params.jitter.any() and params.blur.any() and params.solarize.any() and params.grayscale.any()
    assert_matches_model(images, params)


def test_the_order_of_the_jitter_ops_is_the_drawn_one() -> None:
    """Brightness then contrast is not contrast then brightness (clamping, and the mean moves): both match the model
    in their own order, and they differ."""
    images = images_for_ops(4, seed=2)
    results = []
    for order in [(0, 1, 2, 3), (1, 0, 3, 2)]:
        params = make_params(len(images), jitter=True, order=order, factors=(1.4, 0.6, 1.2, 0.1))
        assert_matches_model(images, params)
        results.append(apply_views(images, params))
    assert not torch.equal(results[0], results[1])


def test_identity_factors_leave_the_image_as_it_is() -> None:
    images = images_for_ops()
    params = make_params(len(images), jitter=True, factors=(1.0, 1.0, 1.0, 0.0))
    assert torch.equal(apply_views(images, params), images)
    assert torch.equal(apply_views(images, make_params(len(images))), images)


def test_a_batch_equals_its_samples_one_at_a_time_in_any_layout() -> None:
    """Subsets are gathered and put back: each sample gets its own ops and nothing of its neighbours'."""
    images = photo_batch(16, size=(20, 24), seed=3)
    params = draw_view_params(ViewRecipe.dino_global_2(), len(images), torch.Generator().manual_seed(5))
    batch = apply_views(images, params)
    for i in range(len(images)):
        one = apply_views(images[i:i + 1], params[i:i + 1])
        assert (batch[i:i + 1].int() - one.int()).abs().max() <= 1
    channels_last = images.contiguous(memory_format=torch.channels_last)
    assert torch.equal(apply_views(channels_last, params), batch)
    assert apply_views(channels_last, params).is_contiguous(memory_format=torch.channels_last)


def test_out_and_normalisation() -> None:
    images = photo_batch(6, size=(16, 16))
    params = draw_view_params(ViewRecipe.dino_local(), len(images), torch.Generator().manual_seed(0))
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    normalised = apply_views(images, params, mean=mean, std=std)
    unrounded = apply_views(images, params, **UNROUNDED)
    expected = (unrounded - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    assert torch.equal(normalised, expected)
    out = torch.empty_like(images, dtype=torch.float32).contiguous(memory_format=torch.channels_last)
    assert apply_views(images, params, out=out, mean=mean, std=std) is out and torch.equal(out, normalised)
    out8 = torch.empty_like(images)
    assert apply_views(images, params, out=out8) is out8 and torch.equal(out8, apply_views(images, params))
    assert apply_views(images[:0], params[0:0]).shape == (0, 3, 16, 16)


@pytest.mark.parametrize("recipe, expected", [
    (ViewRecipe.dino_global_1(), {"jitter": 0.8, "grayscale": 0.2, "blur": 1.0, "solarize": 0.0}),
    (ViewRecipe.dino_global_2(), {"jitter": 0.8, "grayscale": 0.2, "blur": 0.1, "solarize": 0.2}),
    (ViewRecipe.dino_local(), {"jitter": 0.8, "grayscale": 0.2, "blur": 0.5, "solarize": 0.0}),
    (ViewRecipe.dino_global_1(released=True), {"jitter": 0.8, "grayscale": 0.2, "blur": 0.0, "solarize": 0.0}),
    (ViewRecipe.dino_global_2(released=True), {"jitter": 0.8, "grayscale": 0.2, "blur": 0.9, "solarize": 0.2})])
def test_each_flag_comes_up_at_its_probability(recipe: ViewRecipe, expected: dict[str, float]) -> None:
    n = 20_000
    params = draw_view_params(recipe, n, torch.Generator().manual_seed(1))
    for name, p in expected.items():
        share = getattr(params, name).double().mean().item()
        bound = 5 * math.sqrt(p * (1 - p) / n)  # five standard deviations; 0 when p is 0 or 1 (exact)
        assert abs(share - p) <= bound, f"{name}: {share:.4f} for p = {p}"
    low = torch.tensor([0.6, 0.6, 0.8, -0.1])
    high = torch.tensor([1.4, 1.4, 1.2, 0.1])
    assert ((params.factors >= low) & (params.factors <= high)).all()
    assert (params.sigma >= 0.1).all() and (params.sigma <= 2.0).all()
    for column in range(4):  # uniform: each quarter of each range holds a quarter of the draws
        quarter = ((params.factors[:, column] - low[column]) / (high[column] - low[column]) * 4).long().clamp(0, 3)
        assert (torch.bincount(quarter, minlength=4) - n / 4).abs().max() < 5 * math.sqrt(n * 3 / 16)


def test_every_order_of_the_four_ops_is_drawn_equally_often() -> None:
    n = 24_000
    params = draw_view_params(ViewRecipe(), n, torch.Generator().manual_seed(2))
    codes = (params.order * torch.tensor([64, 16, 4, 1])).sum(dim=1)
    counts = torch.unique(codes, return_counts=True)[1]
    assert len(counts) == 24 and (counts - n / 24).abs().max() < 5 * math.sqrt(n / 24)


def test_draws_are_deterministic_for_a_generator_state() -> None:
    recipe = ViewRecipe.dino_global_2()
    first = draw_view_params(recipe, 50, torch.Generator().manual_seed(7))
    again = draw_view_params(recipe, 50, torch.Generator().manual_seed(7))
    other = draw_view_params(recipe, 50, torch.Generator().manual_seed(8))
    names = [f.name for f in dataclasses.fields(ViewParams)]
    assert all(torch.equal(getattr(first, k), getattr(again, k)) for k in names if k not in ("blur_kernel",
                                                                                          "solarize_threshold"))
    assert not torch.equal(first.factors, other.factors)
    images = photo_batch(50, size=(12, 12))
    assert torch.equal(apply_views(images, first), apply_views(images, again))


@pytest.mark.parametrize("field, value", [
    ("jitter", 1.5), ("grayscale", -0.1), ("blur", True), ("solarize", "0.2"), ("brightness", -0.1),
    ("contrast", math.inf), ("saturation", None), ("hue", 0.6), ("blur_sigma", (0.0, 1.0)), ("blur_sigma", (2.0, 1.0)),
    ("blur_sigma", (0.1, 1e308)), ("blur_kernel", 8), ("blur_kernel", 33), ("blur_kernel", 9.0),
    ("solarize_threshold", 256), ("solarize_threshold", 128.0)])
def test_a_bad_recipe_field_is_named(field: str, value: object) -> None:
    with pytest.raises(ConfigError) as error:
        ViewRecipe(**{field: value})
    assert error.value.parameters == (field,) and str(error.value).startswith(field)


def test_bad_inputs_raise_one_clear_value_error() -> None:
    images = photo_batch(3, size=(16, 16))
    params = draw_view_params(ViewRecipe(), 3, torch.Generator().manual_seed(0))
    cases = [
        (lambda: apply_views(images.float(), params), "uint8"),
        (lambda: apply_views(images[:, :2], params), r"\(N, 3, H, W\)"),
        (lambda: apply_views(images[0], params), r"\(N, 3, H, W\)"),
        (lambda: apply_views(images[:2], params), "3 samples for 2 images"),
        (lambda: apply_views(images, params, mean=(0.5, 0.5, 0.5)), "both or neither"),
        (lambda: apply_views(images, params, mean=(0.5, 0.5), std=(1, 1, 1)), "three finite numbers"),
        (lambda: apply_views(images, params, mean=(0.5,) * 3, std=(1, 0, 1)), "std nonzero"),
        (lambda: apply_views(images, params, out=torch.empty(3, 3, 16, 16)), "out must be torch.uint8"),
        (lambda: apply_views(images[:, :, :4, :4], params), "too small for a 9-tap blur"),
        (lambda: apply_views(images, "params"), "ViewParams"),
        (lambda: draw_view_params(ViewRecipe(), -1, torch.Generator()), "n must be"),
        (lambda: draw_view_params({"jitter": 0.8}, 2, torch.Generator()), "ViewRecipe"),
        (lambda: dataclasses.replace(params, order=params.order.flip(0)[:, [0, 0, 1, 2]]), "permutation"),
        (lambda: dataclasses.replace(params, factors=params.factors.double()), "ViewParams.factors must be"),
        (lambda: dataclasses.replace(params, sigma=params.sigma[:2]), "ViewParams.sigma must be"),
        (lambda: dataclasses.replace(params, sigma=-params.sigma), "sigma must be finite and > 0"),
        (lambda: dataclasses.replace(params, factors=params.factors * torch.tensor([1, 1, 1, 9.0])), "hue in"),
        (lambda: ViewParams.cat([params, dataclasses.replace(params, blur_kernel=3)]), "same blur_kernel"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


def test_cat_joins_two_recipes_draws() -> None:
    generator = torch.Generator().manual_seed(0)
    first = draw_view_params(ViewRecipe.dino_global_1(), 3, generator)
    second = draw_view_params(ViewRecipe.dino_global_2(), 2, generator)
    both = ViewParams.cat([first, second])
    assert len(both) == 5 and torch.equal(both.sigma, torch.cat([first.sigma, second.sigma]))
    images = photo_batch(5, size=(16, 16))
    assert torch.equal(apply_views(images, both)[3:], apply_views(images[3:], second))


def test_no_value_of_a_device_tensor_is_read_on_the_host() -> None:
    """On the meta device a tensor has no values: any .item(), bool() or .tolist() of one raises. Every op runs
    (all flags come up for some samples, none for others: gathered subsets and whole batches)."""
    params = draw_view_params(ViewRecipe(jitter=0.9, grayscale=0.5, blur=0.7, solarize=0.5), 32,
                              torch.Generator().manual_seed(0))
    images = torch.empty(32, 3, 24, 24, dtype=torch.uint8, device="meta").contiguous(memory_format=torch.channels_last)
    for kwargs in [{}, {"mean": (0.5, 0.4, 0.3), "std": (0.2, 0.2, 0.2)}]:
        out = apply_views(images, params, **kwargs)
        assert out.device.type == "meta" and out.shape == images.shape
    every = make_params(32, jitter=True, factors=(1.2, 0.8, 1.1, 0.05), grayscale=True, blur=True, solarize=True)
    assert apply_views(images, every).dtype == torch.uint8


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_nothing_waits_for_the_device_and_the_values_match_the_cpu() -> None:
    images = photo_batch(32, size=(64, 64), seed=1)
    params = draw_view_params(ViewRecipe.dino_global_2(), len(images), torch.Generator().manual_seed(3))
    on_cpu = apply_views(images, params, **UNROUNDED)
    cuda = images.cuda()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # any host sync in the batched path raises
    try:
        on_gpu = apply_views(cuda, params, **UNROUNDED)
        rounded = apply_views(cuda, params)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert (on_gpu.cpu() - on_cpu).abs().max() < 1e-5
    assert (rounded.cpu().int() - apply_views(images, params).int()).abs().max() <= 1
