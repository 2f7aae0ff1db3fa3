"""The C kernel of multi-crop views' ops (dataio.augment.views_kernel) against the torch reference (view_ops).

The tolerance is the module docstring's: uint8 within one level; float32 within 1e-5 of max(1, |value|), except a
solarize flip (the two values are then x and 1 - x, normalised: they add up to (1 - 2 mean) / std).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from dataio.augment import views_kernel
from dataio.augment.view_ops import ViewRecipe, apply_views, draw_view_params
from dataio.formats import fallback_log
from tests.augment.helpers import photo_batch
from tests.augment.view_model import make_params

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
RECIPES = {"global_1": ViewRecipe.dino_global_1(), "global_2": ViewRecipe.dino_global_2(),
           "local": ViewRecipe.dino_local(),
           "everything": ViewRecipe(jitter=1.0, grayscale=0.3, blur=1.0, solarize=1.0, hue=0.5, brightness=0.9),
           "wide_blur": ViewRecipe(blur=1.0, blur_kernel=23, blur_sigma=(0.1, 5.0), solarize=0.5)}
kernel_only = pytest.mark.skipif(not views_kernel.AVAILABLE, reason=views_kernel.WITHOUT_KERNEL)


def images(n: int, size: tuple[int, int], seed: int = 0) -> torch.Tensor:
    """Photo-like images and, every third one, uniform noise (every value, sharp edges)."""
    batch = photo_batch(n, size=size, seed=seed)
    noise = torch.from_numpy(np.random.default_rng(seed).integers(0, 256, (n, 3, *size), dtype=np.uint8))
    batch[::3] = noise[::3]
    return batch


def assert_uint8_close(got: torch.Tensor, expected: torch.Tensor) -> None:
    assert got.dtype == expected.dtype == torch.uint8 and got.shape == expected.shape
    diff = (got.int() - expected.int()).abs()
    assert diff.max() <= 1 and (diff > 0).float().mean() < 1e-3, f"max {diff.max()}, {(diff > 0).float().mean():.4%}"


def assert_float_close(got: torch.Tensor, expected: torch.Tensor) -> None:
    assert got.dtype == expected.dtype == torch.float32 and got.shape == expected.shape
    bad = (got - expected).abs() > 1e-5 * expected.abs().clamp(min=1)
    if bad.any():  # only solarize flips: x and 1 - x
        mean, std = torch.tensor(MEAN).view(1, 3, 1, 1), torch.tensor(STD).view(1, 3, 1, 1)
        pair = (got * std + mean) + (expected * std + mean)
        assert ((pair - 1).abs() < 1e-4)[bad].all(), f"{int(bad.sum())} values differ, not by a solarize flip"
        assert bad.float().mean() < 1e-4


@kernel_only
@pytest.mark.parametrize("recipe", list(RECIPES))
@pytest.mark.parametrize("size", [(37, 53), (96, 96), (24, 7)])
def test_kernel_matches_the_reference_in_every_output(recipe: str, size: tuple[int, int]) -> None:
    if RECIPES[recipe].blur_kernel // 2 >= min(size):
        pytest.skip("image smaller than the kernel")
    batch = images(12, size, seed=len(recipe))
    params = draw_view_params(RECIPES[recipe], len(batch), torch.Generator().manual_seed(3))
    assert_uint8_close(views_kernel.apply_views_cpu(batch, params), apply_views(batch, params))
    expected = apply_views(batch, params, mean=MEAN, std=STD)
    planes = views_kernel.apply_views_cpu(batch, params, mean=MEAN, std=STD)
    assert planes.is_contiguous()
    assert_float_close(planes, expected)
    channels_last = batch.contiguous(memory_format=torch.channels_last)
    got = views_kernel.apply_views_cpu(channels_last, params, mean=MEAN, std=STD)
    assert got.is_contiguous(memory_format=torch.channels_last)
    assert_float_close(got, expected)
    assert views_kernel.apply_views_cpu(channels_last, params).is_contiguous(memory_format=torch.channels_last)


@kernel_only
@pytest.mark.parametrize("op, factor", [(0, 1.4), (0, 0.6), (1, 1.4), (1, 0.6), (2, 1.2), (2, 0.0), (3, 0.1),
                                        (3, -0.5), (3, 0.5)])
def test_each_jitter_op_alone(op: int, factor: float) -> None:
    factors = [1.0, 1.0, 1.0, 0.0]
    factors[op] = factor
    batch = images(6, (33, 45), seed=op)
    params = make_params(len(batch), jitter=True, factors=tuple(factors))
    assert_uint8_close(views_kernel.apply_views_cpu(batch, params), apply_views(batch, params))
    assert_float_close(views_kernel.apply_views_cpu(batch, params, mean=MEAN, std=STD),
                       apply_views(batch, params, mean=MEAN, std=STD))


@kernel_only
@pytest.mark.parametrize("flags", [dict(grayscale=True), dict(blur=True, sigma=0.1), dict(blur=True, sigma=2.0),
                                   dict(blur=True, sigma=0.9, blur_kernel=3), dict(blur=True, blur_kernel=1),
                                   dict(solarize=True), dict(solarize=True, solarize_threshold=0),
                                   dict(solarize=True, solarize_threshold=255), dict()])
def test_grayscale_blur_solarize_alone(flags: dict) -> None:
    batch = images(6, (20, 27), seed=9)
    params = make_params(len(batch), **flags)
    assert_uint8_close(views_kernel.apply_views_cpu(batch, params), apply_views(batch, params))
    assert_float_close(views_kernel.apply_views_cpu(batch, params, mean=MEAN, std=STD),
                       apply_views(batch, params, mean=MEAN, std=STD))
    if not flags.get("blur"):  # no blur, no hue: the same float32 operations, bit for bit
        assert torch.equal(views_kernel.apply_views_cpu(batch, params), apply_views(batch, params))


@kernel_only
def test_every_order_of_a_chain_matches_the_reference() -> None:
    """The kernel splits an image at contrast (which needs the mean so far): contrast first, in the middle, last."""
    batch = images(4, (29, 31), seed=5)
    orders = [(1, 0, 2, 3), (0, 1, 2, 3), (3, 2, 1, 0), (2, 3, 0, 1), (0, 2, 3, 1)]
    for order in orders:
        for flags in [dict(), dict(blur=True, sigma=1.3), dict(grayscale=True, solarize=True, blur=True)]:
            params = make_params(len(batch), jitter=True, order=order, factors=(1.3, 0.7, 1.15, -0.08), **flags)
            assert_uint8_close(views_kernel.apply_views_cpu(batch, params), apply_views(batch, params))


@kernel_only
@pytest.mark.parametrize("planar", [False, True])
def test_one_image_at_a_time_equals_the_batch(planar: bool) -> None:
    batch = images(8, (40, 36), seed=1)
    params = draw_view_params(RECIPES["everything"], len(batch), torch.Generator().manual_seed(0))
    hwc = batch.permute(0, 2, 3, 1).contiguous().numpy()
    whole = views_kernel.apply_views_cpu(batch, params)
    whole_float = views_kernel.apply_views_cpu(batch, params, mean=MEAN, std=STD)
    for i in range(len(batch)):
        out = np.empty((40, 36, 3), np.uint8)
        views_kernel.apply_view(hwc[i], params, i, out)
        assert np.array_equal(out, whole[i].permute(1, 2, 0).numpy())
        slot = np.empty((3, 40, 36) if planar else (40, 36, 3), np.float32)
        views_kernel.apply_view(hwc[i], params, i, slot, mean=MEAN, std=STD, planar=planar)
        assert np.array_equal(slot if planar else slot.transpose(2, 0, 1), whole_float[i].numpy())


@kernel_only
def test_four_threads_at_once_give_what_one_thread_gives() -> None:
    """Decode threads call the kernel per image at once: per-thread scratch (of different sizes) never mixes."""
    sizes = [(64, 64), (96, 80), (31, 47), (128, 112)]
    work = []
    for t, size in enumerate(sizes):
        batch = images(6, size, seed=t).permute(0, 2, 3, 1).contiguous().numpy()
        params = draw_view_params(RECIPES["everything"], len(batch), torch.Generator().manual_seed(t))
        work.append((batch, params))

    def run(t: int, results: list) -> None:
        batch, params = work[t]
        for _ in range(5):
            for i in range(len(batch)):
                out = np.empty(batch.shape[1:], np.float32)
                views_kernel.apply_view(batch[i], params, i, out, mean=MEAN, std=STD)
                results.append(out)

    alone = [[] for _ in sizes]
    for t in range(len(sizes)):
        run(t, alone[t])
    together = [[] for _ in sizes]
    threads = [threading.Thread(target=run, args=(t, together[t])) for t in range(len(sizes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for t in range(len(sizes)):
        assert len(together[t]) == len(alone[t])
        assert all(np.array_equal(a, b) for a, b in zip(alone[t], together[t], strict=True))


@pytest.mark.parametrize("planar", [False, True])
def test_without_the_kernel_the_reference_runs_and_says_so_once(planar: bool, monkeypatch, caplog) -> None:
    monkeypatch.setattr(views_kernel, "_views_cpu", None)
    monkeypatch.setattr(fallback_log, "_said", set())
    batch = images(5, (24, 24), seed=2)
    params = draw_view_params(RECIPES["everything"], len(batch), torch.Generator().manual_seed(1))
    with caplog.at_level("WARNING", logger="dataio"):
        assert torch.equal(views_kernel.apply_views_cpu(batch, params), apply_views(batch, params))
        expected = apply_views(batch, params, mean=MEAN, std=STD)
        for i in range(len(batch)):
            slot = np.empty((3, 24, 24) if planar else (24, 24, 3), np.float32)
            views_kernel.apply_view(batch[i].permute(1, 2, 0).contiguous().numpy(), params, i, slot, mean=MEAN,
                                    std=STD, planar=planar)
            assert np.array_equal(slot if planar else slot.transpose(2, 0, 1), expected[i].numpy())
    said = [r.getMessage() for r in caplog.records if "_views_cpu is not built" in r.getMessage()]
    assert len(said) == 1


def test_bad_inputs_raise_one_clear_value_error() -> None:
    batch = images(3, (16, 16))
    hwc = batch.permute(0, 2, 3, 1).contiguous().numpy()
    params = draw_view_params(ViewRecipe(), 3, torch.Generator().manual_seed(0))
    out = np.empty((16, 16, 3), np.uint8)
    cases = [
        (lambda: views_kernel.apply_views_cpu(batch.float(), params), "uint8"),
        (lambda: views_kernel.apply_views_cpu(batch[:2], params), "3 samples for 2 images"),
        (lambda: views_kernel.apply_views_cpu(batch[:, :, :4], params), "too small"),
        (lambda: views_kernel.apply_view(hwc[0].astype(np.float32), params, 0, out), "uint8 \\(H, W, 3\\)"),
        (lambda: views_kernel.apply_view(hwc[0, :, :, :2], params, 0, out), "uint8 \\(H, W, 3\\)"),
        (lambda: views_kernel.apply_view(hwc[0][:, ::2], params, 0, out), "C-contiguous"),
        (lambda: views_kernel.apply_view(hwc[0], params, 3, out), "index must be an int in 0..2"),
        (lambda: views_kernel.apply_view(hwc[0], params, True, out), "index must be"),
        (lambda: views_kernel.apply_view(hwc[0], params, 0, out[:8]), "out must be"),
        (lambda: views_kernel.apply_view(hwc[0], params, 0, out, mean=MEAN, std=STD), "out must be .*float32"),
        (lambda: views_kernel.apply_view(hwc[0], params, 0, out, planar=True), "planar output is float32"),
        (lambda: views_kernel.apply_view(hwc[0], params, 0, out, mean=MEAN), "both or neither"),
        (lambda: views_kernel.apply_view(hwc[0], None, 0, out), "ViewParams"),
    ]
    if views_kernel.AVAILABLE:  # the kernel checks the image against the blur itself
        cases.append((lambda: views_kernel.apply_view(hwc[0][:4, :4].copy(), params, 0, out[:4, :4].copy()),
                      "too small for the blur"))
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


@kernel_only
def test_the_kernel_refuses_bad_buffers_and_plans_and_writes_nothing() -> None:
    from dataio.augment import _views_cpu

    src = np.zeros((2, 8, 8, 3), np.uint8)
    dst = np.full((2, 8, 8, 3), 7, np.uint8)
    params = draw_view_params(ViewRecipe(blur=0.0), 2, torch.Generator().manual_seed(0))
    plan, values = params.host_arrays
    good = (src, dst, 2, 8, 8, plan, values, 9, 128, b"", b"", 0)
    bad_order = plan.copy()
    bad_order[1, 1:] = (0, 0, 1, 2)
    bad_hue = values.copy()
    bad_hue[1, 3] = 0.75
    nan_sigma = values.copy()
    nan_sigma[0, 4] = np.nan
    blur_plan = plan.copy()
    blur_plan[:, 0] |= 4
    cases = [
        ((src[:1], *good[1:]), "src must hold"), ((src, dst[:1], *good[2:]), "dst must hold"),
        ((*good[:5], plan[:1], *good[6:]), "plan must be uint8"), ((*good[:6], values[:, :4].copy(), *good[7:]), "values"),
        ((*good[:7], 8, *good[8:]), "kernel must be odd"), ((*good[:8], 300, *good[9:]), "threshold"),
        ((*good[:11], 3), "layout"), ((*good[:11], 1), "dst must hold"),
        ((src, np.zeros((2, 8, 8, 3), np.float32), *good[2:11], 2), "mean and std"),
        ((*good[:5], bad_order, *good[6:]), "permutation"), ((*good[:6], bad_hue, *good[7:]), "hue shift"),
        ((*good[:6], nan_sigma, *good[7:]), "finite"), ((*good[:5], blur_plan, values, 17, *good[8:]), "too small for the blur"),
    ]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            _views_cpu.apply(*args, 0, 2)
    with pytest.raises(ValueError, match="bad sample range"):
        _views_cpu.apply(*good, 1, 3)
    assert (dst == 7).all()
    _views_cpu.apply(*good[:5], blur_plan, *good[6:], 0, 2)  # 8 px is enough for 9 taps (4 on each side)
    assert (dst == 0).all()
