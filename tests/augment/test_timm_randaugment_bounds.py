"""timm RandAugment strings: the ops per image are bounded when the config is built, and every op's output stays
in [0, 255] as PIL's uint8 images do, so the next op (kornia's equalize) never sees a warp's float error.

Before: ``rand-n100000`` ran for ~40 s and failed inside kornia's equalize ("expects input values in [0, 1]"): a
rotation's bilinear warp gives -0.00002 and 255.00002, and equalize after it refused the batch."""

from __future__ import annotations

import pytest
import torch

import dataio
from dataio.augment.timm_randaugment import TimmDraws, TimmRandAugment
from dataio.augment.timm_strings import MAX_OPS, TIMM_OPS, TimmRandAugmentConfig
from dataio.formats.errors import ConfigError


def _run(names: list[str], n: int = 32) -> torch.Tensor:
    """``names`` applied in order to n half-black, half-white images (rotations of 0.5..10 magnitudes, both
    signs): flat 255 regions are where a bilinear warp's weights summing to 1.00000006 give 255.00002."""
    images = torch.zeros((n, 3, 32, 32), dtype=torch.uint8)
    images[:, :, :, 16:] = 255
    codes = torch.tensor([TIMM_OPS.index(name) for name in names]).repeat(n, 1)
    magnitude = torch.linspace(0.5, 10, n, dtype=torch.float64).view(n, 1).repeat(1, len(names))
    sign = torch.where(torch.arange(n).view(n, 1) % 2 == 0, 1.0, -1.0).repeat(1, len(names))
    stage = TimmRandAugment(TimmRandAugmentConfig(num_ops=len(names), prob=1.0))
    return stage(images, output="float", draws=TimmDraws(ops=codes, magnitude=magnitude, sign=sign))


@pytest.mark.parametrize("string", ["rand-n100000", f"rand-m9-n{MAX_OPS + 1}"])
def test_more_ops_per_image_than_the_maximum_is_one_line_naming_the_section(string, image_shards):
    with pytest.raises(ConfigError) as caught:
        dataio.ImageLoader(image_shards, batch_size=4, image_size=32, train=True, device="cpu", randaugment=string)
    text = str(caught.value)
    assert "auto_augment" in text and f"'n{string.split('-n')[1]}'" in text and str(MAX_OPS) in text, text
    assert "\n" not in text


def test_the_maximum_itself_is_taken():
    assert TimmRandAugmentConfig.from_timm(f"rand-n{MAX_OPS}").num_ops == MAX_OPS
    with pytest.raises(ConfigError, match="num_ops"):
        TimmRandAugmentConfig(num_ops=2.5)


def test_each_op_stays_in_range_so_equalize_after_a_warp_runs():
    """A rotation alone stays within [0, 255] (was 255.00002); rotate, invert, equalize runs (was kornia's
    ValueError: invert made -0.00002 of it, floored to -1)."""
    rotated = _run(["Rotate"])
    assert 0 <= float(rotated.min()) and float(rotated.max()) <= 255
    out = _run(["Rotate", "Invert", "Equalize"])
    assert 0 <= float(out.min()) and float(out.max()) <= 255
