"""Keypoints follow every geometric op the boxes follow: each lands within 2 px of where the same maps move a
tiny box around it, left and right points swap on a mirror, and points leaving the image get visibility 0."""

from __future__ import annotations

import numpy as np
import pytest
from dataio.augment.box_targets import BoxTargets
from dataio.augment.crop_boxes import center_crop_boxes, random_resized_crop_boxes
from dataio.augment.keypoint_targets import map_keypoints_in_slots, map_sample_keypoints, padded_keypoints
from dataio.augment.randaugment import GEOMETRIC, RandAugment, RandAugmentConfig
from dataio.augment.target_maps import crop_resize_maps, device_crop_maps, randaugment_maps
from dataio.formats.coco.coco_keypoints import flip_indices

NAMES = ("nose", "left_eye", "right_eye")
FLIPS = flip_indices(NAMES)
COCO_PERSON = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
               "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip", "left_knee",
               "right_knee", "left_ankle", "right_ankle")
# torchvision's references/detection/transforms.py, _flip_coco_person_keypoints
TORCHVISION_FLIP_INDS = [0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15]


def one_sample(rng: np.random.Generator, count: int, width: float, height: float) -> np.ndarray:
    """(count, 3, 3) keypoints (x, y, v=2) spread over a width x height image, away from its edges."""
    xy = rng.uniform([8, 8], [width - 8, height - 8], size=(count, 3, 2))
    return np.concatenate([xy, np.full((count, 3, 1), 2.0)], axis=-1)


def tiny_boxes(points: np.ndarray) -> np.ndarray:
    """(T * 3, 4) a 0.5 px box around each keypoint."""
    xy = points[..., :2].reshape(-1, 2)
    return np.concatenate([xy - 0.25, xy + 0.25], axis=1)


def check_against_boxes(points: np.ndarray, moved: np.ndarray, maps: np.ndarray, owners: np.ndarray,
                        out: tuple[int, int], flipped: np.ndarray) -> None:
    """Each visible moved keypoint within 2 px of its tiny box's moved centre; boxes that left: visibility 0.
    ``maps`` (N, 3, 3) one stage, or (N, S, 3, 3) RandAugment's slots (each slot clips, as for the boxes)."""
    n = len(maps)
    counts = np.bincount(np.repeat(owners, 3), minlength=n)
    boxes = BoxTargets.from_ragged(tiny_boxes(points), np.zeros(counts.sum()), counts, np.full(n, 1e9),
                                   np.full(n, 1e9))
    boxes = boxes.mapped(maps, *out) if maps.ndim == 3 else boxes.mapped_in_slots(maps, *out)
    centres = boxes.boxes().reshape(-1, 3, 4)
    centres = (centres[..., :2] + centres[..., 2:]) / 2
    fractions = boxes.visible_fractions().reshape(-1, 3)
    gone, here = fractions == 0, fractions > 1 - 1e-9  # a box on the edge: its point may fall either side
    unswapped = moved.copy()
    unswapped[flipped[owners]] = moved[flipped[owners]][:, FLIPS]  # back to the source's order
    assert (unswapped[gone] == 0).all() and (unswapped[..., 2][here] == 2).all()
    assert np.abs(unswapped[..., :2][here] - centres[here]).max() < 2.0
    assert here.sum() > 0


def test_flip_indices_are_torchvisions_for_coco_person_keypoints() -> None:
    assert flip_indices(COCO_PERSON).tolist() == TORCHVISION_FLIP_INDS
    assert flip_indices(("a", "b")).tolist() == [0, 1]  # no sides: nobody moves


def test_crops_resizes_and_flips_move_keypoints_with_their_boxes() -> None:
    rng = np.random.default_rng(0)
    n, per = 6, 4
    widths, heights = rng.integers(100, 400, n).astype(float), rng.integers(100, 400, n).astype(float)
    points = np.concatenate([one_sample(rng, per, w, h) for w, h in zip(widths, heights, strict=True)])
    owners = np.repeat(np.arange(n), per)
    flipped = np.arange(n) % 2 == 1
    for crops in (random_resized_crop_boxes(widths, heights, rng, (0.1, 0.5), (3 / 4, 4 / 3)),
                  center_crop_boxes(widths, heights, 0.875)):
        maps = crop_resize_maps(crops, flipped, 64, 48)
        moved = map_sample_keypoints(points, owners, maps, 64, 48, FLIPS)
        check_against_boxes(points, moved, maps, owners, (64, 48), flipped)
        device = device_crop_maps(np.array([[4.0, 6.0, 40.0, 30.0]] * n), flipped, 32) @ maps
        moved = map_sample_keypoints(points, owners, device, 32, 32, FLIPS)
        check_against_boxes(points, moved, device, owners, (32, 32), np.zeros(n, bool))  # two flips: none


def test_a_horizontal_flip_swaps_left_and_right_and_mirrors_x() -> None:
    points = np.array([[[50.0, 20.0, 2], [40.0, 10.0, 1], [60.0, 10.0, 2]]])
    maps = crop_resize_maps(np.array([[0.0, 0.0, 100.0, 50.0]]), np.array([True]), 100, 50)
    moved = map_sample_keypoints(points, np.zeros(1, np.int64), maps, 100, 50, FLIPS)
    # the right eye (60 -> 40) is now the point called right_eye's partner: left_eye at x=40 keeps visibility 2
    assert moved[0].tolist() == [[50.0, 20.0, 2.0], [40.0, 10.0, 2.0], [60.0, 10.0, 1.0]]


def test_points_that_leave_the_crop_get_visibility_0_and_unlabelled_ones_stay_0() -> None:
    points = np.array([[[5.0, 5.0, 2], [50.0, 25.0, 1], [0.0, 0.0, 0]]])
    maps = crop_resize_maps(np.array([[20.0, 10.0, 80.0, 40.0]]), np.array([False]), 60, 30)
    moved = map_sample_keypoints(points, np.zeros(1, np.int64), maps, 60, 30, FLIPS)
    assert moved[0].tolist() == [[0.0, 0.0, 0.0], [30.0, 15.0, 1.0], [0.0, 0.0, 0.0]]


@pytest.mark.parametrize("op", GEOMETRIC)
def test_randaugment_geometric_ops_move_keypoints_with_their_boxes(op: str) -> None:
    rng = np.random.default_rng(1)
    n, per, size = 8, 3, 64
    points = np.concatenate([one_sample(rng, per, size, size) for _ in range(n)])
    owners = np.repeat(np.arange(n), per)
    augment = RandAugment(RandAugmentConfig(num_ops=2, magnitude=9, ops=(op,)))
    augment.generator.manual_seed(5)
    slot_maps = randaugment_maps(augment.draw(n), size, size)
    assert not np.allclose(slot_maps, np.eye(3)), "the op moved nothing"
    moved = map_keypoints_in_slots(points, owners, slot_maps, size, size, FLIPS)
    check_against_boxes(points, moved, slot_maps, owners, (size, size), np.zeros(n, bool))


def test_padded_keypoints_line_up_with_padded_boxes() -> None:
    points = np.arange(3 * 2 * 3, dtype=float).reshape(3, 2, 3)
    offsets = np.array([0, 2, 2, 3])
    out = padded_keypoints(points, offsets, 2)
    assert out.shape == (3, 2, 2, 3) and out.dtype == np.float32
    assert out[0].tolist() == points[:2].tolist() and (out[1] == 0).all() and out[2, 0].tolist() == points[2].tolist()
