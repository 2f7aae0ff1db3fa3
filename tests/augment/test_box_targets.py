"""BoxTargets and the stage maps: clipping against sampled geometry, the ragged layout, bad input, and each map
against the image operation it stands for (the turbo clamp, the device crop, RandAugment's draws)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dataio.augment import RandAugment, RandAugmentConfig, SeedKey
from dataio.augment.box_targets import BoxTargets
from dataio.augment.chain import CropBoxes, RandomResizedCrop
from dataio.augment.convex_clip import apply_maps, box_corners, clip_to_rectangles, envelopes, polygon_areas
from dataio.augment.mix import MixConfig, refuse_with_box_targets
from dataio.augment.randaugment import GEOMETRIC, OPS, kernel_plan
from dataio.augment.target_maps import decoded_crop_boxes, device_crop_maps, randaugment_maps
from dataio.formats.errors import ConfigError
from dataio.images.turbo_decode import _clamped, decode_crop_into
from tests.augment.shape_photos import shape_photo, shape_pixels


def random_affine(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, 3, 3) rotations, shears, scales and shifts: what the stages compose to."""
    angle, shear = rng.uniform(-np.pi, np.pi, n), rng.uniform(-0.5, 0.5, n)
    scale, shift = rng.uniform(0.5, 2.0, (n, 2)), rng.uniform(-40, 40, (n, 2))
    maps = np.zeros((n, 3, 3))
    cos, sin = np.cos(angle), np.sin(angle)
    maps[:, 0, 0], maps[:, 0, 1] = scale[:, 0] * cos, scale[:, 0] * (-sin + shear * cos)
    maps[:, 1, 0], maps[:, 1, 1] = scale[:, 1] * sin, scale[:, 1] * (cos + shear * sin)
    maps[:, :2, 2], maps[:, 2, 2] = shift, 1
    return maps


def test_clipped_polygons_match_a_fine_sampling_of_the_warped_boxes() -> None:
    """Area and bounds of (box -> affine -> clip -> affine -> clip) against points sampled 0.1 px apart."""
    rng = np.random.default_rng(0)
    boxes = np.sort(rng.uniform(0, 60, (40, 2, 2)), axis=1).reshape(40, 4)  # x0, y0, x1, y1
    first, second = random_affine(rng, 40), random_affine(rng, 40)
    width, height = 64.0, 48.0
    polygons = clip_to_rectangles(apply_maps(box_corners(boxes), first), np.full(40, width), np.full(40, height))
    polygons = clip_to_rectangles(apply_maps(polygons, second), np.full(40, width), np.full(40, height))
    ys, xs = np.mgrid[0:height:0.1, 0:width:0.1] + 0.05
    points = np.stack([xs.ravel(), ys.ravel(), np.ones(xs.size)])
    for i in range(40):
        back = np.linalg.inv(second[i]) @ points  # inside the first clip's image, then inside the box
        source = np.linalg.inv(first[i]) @ back
        inside = ((back[0] >= 0) & (back[0] <= width) & (back[1] >= 0) & (back[1] <= height)
                  & (source[0] >= boxes[i, 0]) & (source[0] <= boxes[i, 2])
                  & (source[1] >= boxes[i, 1]) & (source[1] <= boxes[i, 3]))
        sampled_area = inside.sum() * 0.01
        assert abs(polygon_areas(polygons[i:i + 1])[0] - sampled_area) <= 0.02 * sampled_area + 1.0, i
        if inside.sum() > 100:
            got = envelopes(polygons[i:i + 1])[0]
            xs, ys = points[0, inside], points[1, inside]
            sampled = [xs.min(), ys.min(), xs.max(), ys.max()]
            assert np.abs(got - sampled).max() <= 0.5, (i, got, sampled)  # a sharp tip can fall between samples


def test_ragged_layout_drops_and_pads() -> None:
    boxes = [np.array([[10, 10, 30, 20], [90, 0, 120, 10]]), np.zeros((0, 4)), np.array([[0, 0, 5, 5]])]
    targets = BoxTargets.from_lists(boxes, [np.array([3, 4]), np.zeros(0), np.array([7])], [100, 50, 10], [100, 50, 10])
    assert targets.offsets.tolist() == [0, 2, 2, 3] and targets.owners().tolist() == [0, 0, 2]
    np.testing.assert_allclose(targets.boxes(), [[10, 10, 30, 20], [90, 0, 100, 10], [0, 0, 5, 5]])
    np.testing.assert_allclose(targets.visible_fractions(), [1, 1 / 3, 1])
    kept, index = targets.kept(min_visible=0.5)
    assert index.tolist() == [0, 2] and kept.labels.tolist() == [3, 7] and kept.offsets.tolist() == [0, 1, 1, 2]
    padded, labels, valid = kept.padded()
    assert padded.shape == (3, 1, 4) and labels.tolist() == [[3], [-1], [7]] and valid.tolist() == [[1], [0], [1]]
    assert [len(b) for b, _ in kept.per_sample()] == [1, 0, 1]
    with pytest.raises(ValueError, match="more than max_boxes=0"):
        kept.padded(max_boxes=0)


def test_boxes_of_no_width_or_outside_are_dropped_whatever_the_threshold() -> None:
    boxes = np.array([[5, 5, 5, 9], [20, 20, 10, 30], [200, 200, 300, 300], [1, 1, 3, 3]], np.float64)
    targets = BoxTargets.from_ragged(boxes, [0, 1, 2, 3], [4], [100], [100])
    kept, index = targets.kept(min_visible=0.0)
    assert index.tolist() == [3]
    _, index = targets.kept(min_visible=0.0, min_side=2.0)
    assert index.tolist() == []


def test_bad_boxes_are_named() -> None:
    with pytest.raises(ValueError, match=r"box 1 is not finite"):
        BoxTargets.from_ragged(np.array([[0, 0, 1, 1], [0, np.nan, 1, 1]]), [0, 0], [2], [10], [10])
    with pytest.raises(ValueError, match="disagree"):
        BoxTargets.from_ragged(np.zeros((2, 4)), [0], [2], [10], [10])
    targets = BoxTargets.from_ragged(np.zeros((1, 4)), [0], [1], [10], [10])
    with pytest.raises(ValueError, match=r"expected \(1, 3, 3\) maps"):
        targets.mapped(np.zeros((2, 3, 3)), 10, 10)


def test_photometric_ops_leave_targets_unchanged() -> None:
    augment = RandAugment(RandAugmentConfig(num_ops=3, ops=tuple(name for name in OPS if name not in GEOMETRIC)))
    draws = augment.draw(16)
    maps = randaugment_maps(draws, 64, 64)
    assert np.array_equal(maps, np.tile(np.eye(3), (16, 3, 1, 1)))
    boxes = np.random.default_rng(0).uniform(0, 30, (16, 4)) + [0, 0, 30, 30]
    targets = BoxTargets.from_ragged(boxes, np.arange(16), np.ones(16, int), np.full(16, 64), np.full(16, 64))
    assert np.array_equal(targets.mapped_in_slots(maps, 64, 64).boxes(), targets.boxes())


def test_geometric_slots_are_the_inverses_of_the_maps_both_image_paths_apply() -> None:
    augment = RandAugment(RandAugmentConfig(num_ops=2, ops=GEOMETRIC))
    draws = augment.draw(8)
    codes, params = kernel_plan(*draws, 48, 64)  # the C kernel's six PIL coefficients per slot
    inverse = np.zeros((8, 2, 3, 3))
    inverse[..., :2, :] = params.reshape(8, 2, 2, 3)
    inverse[..., 2, 2] = 1
    assert (codes == 9).all()
    np.testing.assert_allclose(randaugment_maps(draws, 48, 64) @ inverse, np.tile(np.eye(3), (8, 2, 1, 1)), atol=1e-9)


def test_randaugment_takes_the_callers_draws() -> None:
    images = torch.randint(0, 256, (6, 3, 24, 32), dtype=torch.uint8)
    augment = RandAugment(RandAugmentConfig(num_ops=2))
    augment.seed_for(SeedKey(seed=3))
    drawn_inside = augment(images)
    augment.seed_for(SeedKey(seed=3))
    assert torch.equal(augment(images, draws=augment.draw(6)), drawn_inside)
    with pytest.raises(ValueError, match="draws are for"):
        augment(images, draws=augment.draw(5))


def test_decoded_crop_boxes_are_the_turbo_decoders_clamp() -> None:
    rng = np.random.default_rng(1)
    widths, heights = rng.integers(1, 50, 200), rng.integers(1, 50, 200)
    boxes = rng.uniform(-20, 70, (200, 4))
    ours = decoded_crop_boxes(boxes, widths, heights)
    for i in range(200):
        assert tuple(ours[i]) == _clamped(boxes[i], int(widths[i]), int(heights[i])), i


def test_device_crop_maps_follow_the_device_crop() -> None:
    """Boxes through ``device_crop_maps`` bound the shapes ``crop_on_device``'s crop gives (align_corners)."""
    rng = np.random.default_rng(5)
    photo = shape_photo(300, 240, rng)
    whole = np.zeros((96, 128, 3), np.uint8)  # the host's fixed-size decode
    decode_crop_into(photo.jpeg, np.array([0, 0, 300, 240]), False, whole)
    host = np.diag([128 / 300, 96 / 240, 1.0])
    n = 6
    crops = np.column_stack([rng.integers(0, 40, n), rng.integers(0, 30, n), rng.integers(80, 128, n),
                             rng.integers(60, 96, n)]).astype(np.float64)
    flipped = np.arange(n) % 2 == 1
    images = RandomResizedCrop(64)(torch.from_numpy(np.stack([whole] * n)).permute(0, 3, 1, 2),
                                   CropBoxes(boxes=crops, flipped=flipped))
    count = len(photo.boxes)
    targets = BoxTargets.from_ragged(np.tile(photo.boxes, (n, 1)), np.tile(np.arange(count), n), np.full(n, count),
                                     np.full(n, 300), np.full(n, 240))
    targets = targets.mapped(np.tile(host, (n, 1, 1)), 128, 96).mapped(device_crop_maps(crops, flipped, 64), 64, 64)
    kept, index = targets.kept(0.5)
    pixels = images.round().to(torch.uint8).permute(0, 2, 3, 1).numpy()
    for box, row, sample in zip(kept.boxes(), index, kept.owners(), strict=True):
        ys, xs = np.nonzero(shape_pixels(pixels[sample], photo.colours[row % count]))
        bounds = np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
        assert (bounds[:2] >= box[:2] - 2).all() and (bounds[2:] <= box[2:] + 2).all(), (sample, box, bounds)
        if photo.kinds[row % count] == "rect":
            assert np.abs(bounds - box).max() <= 2, (sample, box, bounds)
    assert len(index) >= n


def test_mixing_is_refused_with_box_targets_in_one_line() -> None:
    refuse_with_box_targets(None)
    with pytest.raises(ConfigError) as caught:
        refuse_with_box_targets(MixConfig(num_classes=10))
    message = caught.value.for_names({"mix": "--mix"})
    assert message.startswith("--mix (MixUp/CutMix) cannot be used with box or mask targets") and "\n" not in message
