"""The detection crop sampler: every window it returns meets the rule it was drawn under, in bounded time."""

from __future__ import annotations

import numpy as np
import pytest

from dataio.augment.bbox_crop import BBoxCropConfig, bbox_crop_boxes
from dataio.formats.errors import ConfigError


def batch(seed: int, n: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Images of mixed sizes with 0-6 boxes each: (widths, heights, boxes (T, 4), counts)."""
    rng = np.random.default_rng(seed)
    widths, heights = rng.integers(200, 900, n).astype(float), rng.integers(200, 900, n).astype(float)
    counts = rng.integers(0, 7, n)
    owners = np.repeat(np.arange(n), counts)
    size = rng.uniform(0.1, 0.6, (len(owners), 2)) * np.stack([widths[owners], heights[owners]], 1)
    x0 = rng.uniform(0, widths[owners] - size[:, 0])
    y0 = rng.uniform(0, heights[owners] - size[:, 1])
    return widths, heights, np.stack([x0, y0, x0 + size[:, 0], y0 + size[:, 1]], 1), counts


def iou(boxes: np.ndarray, window: np.ndarray) -> np.ndarray:
    inter = (np.clip(np.minimum(boxes[:, 2], window[2]) - np.maximum(boxes[:, 0], window[0]), 0, None)
             * np.clip(np.minimum(boxes[:, 3], window[3]) - np.maximum(boxes[:, 1], window[1]), 0, None))
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    return inter / (areas + (window[2] - window[0]) * (window[3] - window[1]) - inter)


@pytest.mark.parametrize("all_boxes", [True, False])
def test_every_window_meets_its_threshold_scale_aspect_and_keeps_a_centre(all_boxes: bool) -> None:
    config = BBoxCropConfig(thresholds=(0.3,), allow_no_crop=False, scaling=(0.3, 1.0), aspect_ratio=(0.5, 2.0),
                            all_boxes_above_threshold=all_boxes)
    widths, heights, boxes, counts = batch(0)
    crops, kept = bbox_crop_boxes(widths, heights, boxes, counts, np.random.default_rng(1), config)
    assert (crops == np.round(crops)).all() and (crops[:, :2] >= 0).all()
    assert (crops[:, 2] <= widths).all() and (crops[:, 3] <= heights).all()
    offsets = np.concatenate([[0], np.cumsum(counts)])
    cropped = 0
    for i in range(len(widths)):
        window, own = crops[i], boxes[offsets[i]:offsets[i + 1]]
        centres = (own[:, :2] + own[:, 2:]) / 2
        inside = ((centres > window[:2]) & (centres < window[2:])).all(axis=1)
        assert (kept[offsets[i]:offsets[i + 1]] == inside).all()
        if (window == [0, 0, widths[i], heights[i]]).all():
            continue  # no window passed in 50 attempts: the image is left whole
        cropped += 1
        relative = (window[2:] - window[:2]) / [widths[i], heights[i]]
        assert (relative >= 0.3 - 1 / 200).all() and 0.5 - 0.01 <= relative[0] / relative[1] <= 2.0 + 0.01
        if len(own):
            overlaps = iou(own, window)
            assert (overlaps >= 0.3).all() if all_boxes else (overlaps >= 0.3).any(), i
            assert inside.any(), i
    assert cropped >= 10  # enough windows checked (all boxes at IoU 0.3 is often impossible: left whole)


def test_overlap_one_keeps_every_box_whole() -> None:
    config = BBoxCropConfig(thresholds=(1.0,), threshold_type="overlap", allow_no_crop=False)
    widths, heights, boxes, counts = batch(2)
    crops, kept = bbox_crop_boxes(widths, heights, boxes, counts, np.random.default_rng(3), config)
    owners = np.repeat(np.arange(len(widths)), counts)
    window = crops[owners]
    assert ((boxes[:, :2] >= window[:, :2]) & (boxes[:, 2:] <= window[:, 2:])).all()
    assert kept.all()
    assert ((crops[:, 2] - crops[:, 0]) < widths).sum() >= 10  # real crops, not only whole images


def test_an_impossible_rule_gives_up_after_total_num_attempts_and_leaves_images_whole() -> None:
    config = BBoxCropConfig(thresholds=(1.0,), allow_no_crop=False, scaling=(0.3, 0.5), total_num_attempts=7,
                            num_attempts=3)
    widths, heights, boxes, counts = batch(4)
    boxes[:, 2:] = boxes[:, :2] + 1  # IoU 1 with a window of at least 30% of the image: never
    crops, kept = bbox_crop_boxes(widths, heights, boxes, counts, np.random.default_rng(5), config)
    with_boxes = counts > 0
    assert (crops[with_boxes] == np.stack([0 * widths, 0 * heights, widths, heights], 1)[with_boxes]).all()
    assert kept.all()


def test_no_crop_is_one_more_option_and_the_draw_is_seeded() -> None:
    config = BBoxCropConfig(thresholds=(0.0,), allow_no_crop=True, scaling=(0.5, 0.5), aspect_ratio=(0.1, 10))
    widths, heights, _, _ = batch(6, n=2000)
    empty = np.zeros((0, 4))
    crops, _ = bbox_crop_boxes(widths, heights, empty, np.zeros(2000, int), np.random.default_rng(7), config)
    whole = (crops[:, 2] == widths) & (crops[:, 3] == heights)
    assert 0.45 <= whole.mean() <= 0.55  # 2 options, and a threshold of 0 passes any window at once
    again, _ = bbox_crop_boxes(widths, heights, empty, np.zeros(2000, int), np.random.default_rng(7), config)
    assert np.array_equal(crops, again)


@pytest.mark.parametrize("field,value", [("thresholds", ()), ("thresholds", (1.5,)), ("threshold_type", "area"),
                                         ("scaling", (0.0, 1.0)), ("scaling", (0.8, 0.5)), ("aspect_ratio", (0, 2)),
                                         ("num_attempts", 0), ("total_num_attempts", 0)])
def test_bad_settings_are_refused_naming_them(field: str, value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        BBoxCropConfig(**{field: value})
    assert caught.value.parameters == (field,) and field in str(caught.value)


def test_crowded_batches_are_weighed_in_bounded_memory() -> None:
    import tracemalloc

    n, k = 32, 1000  # 32,000 boxes x 50 windows: every (box, window) array at once took 136 MB
    rng = np.random.default_rng(0)
    corners = rng.uniform(0, 300, (n * k, 2))
    boxes = np.concatenate([corners, corners + 20], axis=1)
    widths, heights, counts = np.full(n, 640.0), np.full(n, 480.0), np.full(n, k)
    tracemalloc.start()
    try:
        crops, kept = bbox_crop_boxes(widths, heights, boxes, counts, np.random.default_rng(1), BBoxCropConfig())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 << 20, f"{peak / 2**20:.0f} MB"
    assert crops.shape == (n, 4) and kept.shape == (n * k,) and kept.any()
