"""Hostile pass over issue 43's timm surface: ``MixConfig.from_timm``, timm RandAugment strings, the batched
RandomErasing and ColorJitter loader options, and PIL-only ``transform=`` on the loader.

Each failing test is run as a user meets it: the public constructor or a loader's first batch, in a subprocess
under ``prlimit --as`` where the failure is unbounded memory. A bad value must be one ``ValueError``/
``ConfigError`` line naming the option when the config is built, never a TypeError or numpy/torch error from the
first batch, nor a silent NaN or black batch.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import pytest
import torch

import dataio
from dataio.augment.mix import MixConfig
from dataio.formats.errors import ConfigError

NAN, INF = float("nan"), float("inf")


def first_batch(folder, **options):
    loader = dataio.ImageLoader(folder, batch_size=8, image_size=32, train=True, device="cpu", num_workers=1,
                                seed=1, **options)
    return next(iter(loader))


def one_line_naming(error: BaseException, name: str) -> None:
    text = str(error)
    assert isinstance(error, ValueError), f"{type(error).__name__}: {text}"  # ConfigError is a ValueError
    assert name in text and "\n" not in text, text


# ---------------------------------------------------------------- MixConfig.from_timm


@pytest.mark.parametrize("key", ["mixup_alpha", "cutmix_alpha"])
@pytest.mark.parametrize("value", [NAN, INF])
def test_from_timm_refuses_a_nan_or_infinite_alpha(key, value, image_shards):
    """Now: accepted (``nan < 0`` and ``nan == 0`` are False). A NaN/inf mixup_alpha alone gives the loader's first
    batch NaN soft targets; a NaN/inf cutmix_alpha alone silently mixes nothing (one-hot targets, lam 1).
    Should: one line naming the alpha when the config is built, as a negative alpha is refused."""
    args = {"num_classes": 3, "mixup_alpha": 0.0, "cutmix_alpha": 0.0, key: value}
    try:
        mix = MixConfig.from_timm(args)
    except ValueError as error:
        one_line_naming(error, key.split("_")[0])
        return
    _, targets = first_batch(image_shards, mix=mix)
    pytest.fail(f"{key}={value} accepted; first batch's targets {targets[:2].tolist()}")


@pytest.mark.parametrize("args, name", [
    ({"num_classes": "3"}, "num_classes"),                 # now TypeError: '<' not supported between str and int
    ({"num_classes": 3.5}, "num_classes"),                 # now accepted; torch.full TypeError at the first batch
    ({"mode": ["elem"]}, "mode"),                          # now TypeError: unhashable type: 'list'
    ({"cutmix_minmax": 0.5}, "cutmix_minmax"),             # now TypeError: 'float' object is not subscriptable
    ({"cutmix_minmax": "0.2,0.8"}, "cutmix_minmax"),       # now ValueError: could not convert string to float: '.'
    ({"cutmix_minmax": (0.2, 0.8, 0.9)}, "cutmix_minmax"),  # now accepted, the third value silently dropped
])
def test_from_timm_refuses_wrong_types_and_shapes_in_one_line(args, name, image_shards):
    """reliability.md: 'a keyword timm does not take, or a bad mode or minmax, is one line'."""
    full = {"num_classes": 3, "mixup_alpha": 0.8, "cutmix_alpha": 1.0, **args}
    try:
        mix = MixConfig.from_timm(full)
    except Exception as error:  # noqa: BLE001
        one_line_naming(error, name)
        return
    try:
        first_batch(image_shards, mix=mix)
    except Exception as error:  # noqa: BLE001
        pytest.fail(f"{args} accepted by from_timm, then at the first batch: {type(error).__name__}: {error}")
    pytest.fail(f"{args} accepted as {mix}")


def test_a_cutmix_minmax_below_one_pixel_is_refused_before_the_first_batch(image_shards):
    """(0.01, 0.02) of a 32 px crop draws sides in [0, 0): now numpy's ``ValueError: high <= 0`` escapes from the
    first batch (timm's own randint fails alike). Should: one line naming cutmix_minmax and the image size, when
    the loader is built."""
    mix = MixConfig.from_timm({"num_classes": 3, "cutmix_minmax": (0.01, 0.02)})
    with pytest.raises(ValueError) as caught:
        dataio.ImageLoader(image_shards, batch_size=8, image_size=32, train=True, device="cpu", num_workers=1,
                           mix=mix)  # building it must refuse; iterating is too late
    one_line_naming(caught.value, "cutmix_minmax")


def test_control_from_timm_refuses_an_unknown_key_and_a_bad_mode(image_shards):
    for args, name in [({"num_classes": 3, "mix_alpha": 1.0}, "mix_alpha"), ({"num_classes": 3, "mode": "x"}, "mode")]:
        with pytest.raises(ConfigError) as caught:
            MixConfig.from_timm(args)
        one_line_naming(caught.value, name)
    _, targets = first_batch(image_shards, mix=MixConfig.from_timm({"num_classes": 3, "cutmix_alpha": 1.0}))
    assert torch.isfinite(targets).all() and torch.allclose(targets.sum(1), torch.ones(8))


# ---------------------------------------------------------------- colour jitter


@pytest.mark.parametrize("value", [NAN, INF, (0.4, NAN, 0.4), "0.4"])
def test_colour_jitter_refuses_nan_infinite_or_text_strengths(value, image_shards):
    """Now: NaN is silently no jitter (torchvision's ColorJitter raises ValueError for it), inf gives an all-black
    batch (mean 0, std 0), and "0.4" is a TypeError from ``min``. Should: one line naming color_jitter."""
    try:
        images, _ = first_batch(image_shards, color_jitter=value)
    except Exception as error:  # noqa: BLE001
        one_line_naming(error, "color_jitter")
        return
    pytest.fail(f"color_jitter={value!r} accepted: batch mean {images.float().mean():.1f} std "
                f"{images.float().std():.1f}")


# ---------------------------------------------------------------- random erasing


@pytest.mark.parametrize("count", [0, -3])
def test_re_count_refusal_names_the_value_given(count, image_shards):
    """Now: 're_count must be >= 1, got 1' for re_count=0 (``max_count or min_count``). Should name what was given."""
    with pytest.raises(ConfigError) as caught:
        dataio.ImageLoader(image_shards, batch_size=8, image_size=32, train=True, device="cpu", normalize=True,
                           re_prob=0.5, re_count=count)
    assert f"got {count}" in str(caught.value), str(caught.value)


def test_a_fractional_re_count_is_refused_when_the_loader_is_built(image_shards):
    """Now: accepted, then ``TypeError: 'float' object cannot be interpreted as an integer`` from the first batch."""
    try:
        first_batch(image_shards, normalize=True, re_prob=0.5, re_count=2.5)
    except Exception as error:  # noqa: BLE001
        one_line_naming(error, "re_count")
        return
    pytest.fail("re_count=2.5 accepted")


BOUND_SCRIPT = textwrap.dedent("""
    import sys, dataio
    options = eval(sys.argv[2])
    try:
        loader = dataio.ImageLoader(sys.argv[1], batch_size=8, image_size=32, train=True, device="cpu",
                                    num_workers=1, **options)
        next(iter(loader))
        print("RESULT ok")
    except BaseException as error:
        print("RESULT", type(error).__name__, str(error).replace("\\n", "|")[:300])
""")


@pytest.mark.parametrize("options, name", [
    ("dict(normalize=True, re_prob=0.5, re_count=10**9)", "re_count"),  # now MemoryError: 238 GiB (8, 1e9, 4)
    ("dict(randaugment='rand-n1000000000000000')", "auto_augment"),      # now RuntimeError: allocate 64 PB
])
def test_a_huge_count_is_refused_at_build_within_bounded_memory(options, name, image_shards, tmp_path):
    """A count field of 10**9 / 10**15 (checklist class 2): under ``prlimit --as=3GB`` the loader must refuse it in
    one line naming the option when it is built; now the first batch tries to allocate it and raises
    MemoryError / RuntimeError (DefaultCPUAllocator)."""
    script = tmp_path / "bound.py"
    script.write_text(BOUND_SCRIPT)
    done = subprocess.run(["prlimit", "--as=3000000000", sys.executable, str(script), str(image_shards), options],
                          capture_output=True, text=True, timeout=300)
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
    assert result, done.stderr[-2000:]
    kind, _, message = result[-1][len("RESULT "):].partition(" ")
    assert kind == "ConfigError" and name in message, result[-1]


# ---------------------------------------------------------------- timm RandAugment strings


@pytest.mark.parametrize("string, part", [("rand-m9-x5", "x5"), ("rand-m9x", "m9x"), ("augmix-m5", "augmix"),
                                          ("rand-m9-", "''")])
def test_control_randaugment_strings_refused_naming_the_part(string, part):
    with pytest.raises(ConfigError) as caught:
        dataio.augment.timm_strings.TimmRandAugmentConfig.from_timm(string)
    assert part in str(caught.value) and "\n" not in str(caught.value)


# ---------------------------------------------------------------- PIL-only transform=


class _FailsOnTheFifth:
    """A PIL-only transform (calls ``convert``) that raises on the fifth image it sees."""

    def __init__(self) -> None:
        self.seen = 0

    def __call__(self, image):
        image.convert("RGB")
        self.seen += 1
        if self.seen == 5:
            raise ValueError("cannot handle this image")
        return image


def test_an_exception_inside_a_pil_transform_names_the_sample(image_shards):
    """A wrong return is named with its sample ('for sample '000000035' in shard shard-000005.tar'); an exception
    raised inside the same transform now reaches the user as the bare ``ValueError: cannot handle this image``,
    with no sample or shard. Should: the sample and shard named (the original error chained or quoted)."""
    loader = dataio.ImageLoader(image_shards, batch_size=4, image_size=32, train=True, device="cpu",
                                num_workers=1, transform=_FailsOnTheFifth())
    with pytest.raises(Exception) as caught:
        for _ in loader:
            pass
    text = str(caught.value)
    assert "cannot handle this image" in text
    assert "sample" in text and "shard" in text, f"{type(caught.value).__name__}: {text}"


def test_control_a_pil_transform_returning_another_size_names_the_sample(image_shards):
    class Small:
        def __call__(self, image):
            image.convert("RGB")
            return image.resize((10, 10))

    with pytest.raises(ConfigError) as caught:
        next(iter(dataio.ImageLoader(image_shards, batch_size=4, image_size=32, train=True, device="cpu",
                                     num_workers=1, transform=Small())))
    assert "for sample" in str(caught.value) and "(3, 10, 10)" in str(caught.value)


# ---------------------------------------------------------------- determinism and resume with the new ops


def test_control_new_ops_are_deterministic_and_resume_exactly(image_shards):
    options = dict(batch_size=4, image_size=32, train=True, device="cpu", normalize=True, seed=5, num_workers=1,
                   color_jitter=0.4, re_prob=0.5, re_mode="pixel", re_count=3, randaugment="rand-m9-mstd0.5-inc1")

    def run(state=None):
        loader = dataio.ImageLoader(image_shards, **options)
        if state is not None:
            loader.load_state_dict(state)
        batches, saved = [], None
        for i, (images, _) in enumerate(loader):
            batches.append(images.clone())
            if i == 2 and state is None:
                saved = loader.state_dict()
        return batches, saved

    first, state = run()
    again, _ = run()
    assert len(first) == len(again) and all(torch.equal(a, b) for a, b in zip(first, again))
    rest, _ = run(state)
    assert len(rest) == len(first) - 3 and all(torch.equal(a, b) for a, b in zip(first[3:], rest))
    assert math.isfinite(float(first[0].mean()))
