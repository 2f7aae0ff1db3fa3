"""iBOT's patch masks of the global views (``augment.ibot_masks``): DINOv2's collate's shares and shapes, blocks of
patches, seeded draws."""

from __future__ import annotations

import numpy as np
import pytest

from dataio.augment.ibot_masks import IbotMasks, ibot_masks
from dataio.formats.errors import ConfigError


def _draw(seed: int, crops: int = 64, size: int = 224, **options) -> dict:
    return ibot_masks(IbotMasks(**options), crops, size, np.random.default_rng(seed))


def test_half_the_crops_are_masked_with_ratios_spread_over_the_range():
    out = _draw(0)
    masks = out["collated_masks"]
    assert masks.shape == (64, 256) and masks.dtype == bool
    counts = np.sort(masks.sum(axis=1))
    assert (counts == 0).sum() == 32  # probability 0.5: the other half unmasked
    masked = counts[32:]
    assert masked.min() >= 4 and masked.max() <= 0.5 * 256  # at least one block; never past the ratio's top
    assert np.corrcoef(np.arange(32), masked)[0, 1] > 0.9  # spread evenly over 0.1-0.5, as the steps are
    assert out["upperbound"] == sum(int(256 * p) for p in np.linspace(0.1, 0.5, 33)[1:])


def test_the_side_fields_are_dinov2s():
    out = _draw(1)
    masks = out["collated_masks"]
    assert np.array_equal(out["mask_indices_list"], np.flatnonzero(masks))
    assert out["n_masked_patches"].tolist() == [int(masks.sum())]
    per_crop = masks.sum(axis=1)
    expected = np.repeat(1 / per_crop[per_crop > 0], per_crop[per_crop > 0]).astype(np.float32)
    assert np.allclose(out["masks_weight"], expected)  # each masked crop's tokens weigh 1 in its loss together


def test_masks_are_blocks_of_patches_and_seeded():
    masks = _draw(2, crops=16)["collated_masks"].reshape(16, 16, 16)
    for mask in masks[masks.any(axis=(1, 2))]:
        rows, cols = np.nonzero(mask)
        neighbours = sum(mask[r - 1, c] if r else 0 for r, c in zip(rows, cols, strict=True))
        assert neighbours >= len(rows) // 3  # rectangles: most masked patches sit under another
    assert np.array_equal(_draw(3)["collated_masks"], _draw(3)["collated_masks"])
    assert not np.array_equal(_draw(3)["collated_masks"], _draw(4)["collated_masks"])


@pytest.mark.parametrize("field, value", [("patch_size", 0), ("ratio", (0.6, 0.2)), ("probability", 1.5),
                                          ("min_patches", True), ("min_aspect", 0.0)])
def test_bad_options_are_refused_naming_them(field, value):
    with pytest.raises(ConfigError, match=f"^{field} must"):
        IbotMasks(**{field: value})
