"""Mask targets: the crop against PIL's own nearest resize, the slot warp against a per-pixel walk, COCO decoding."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from PIL import Image

from dataio.augment.mask_targets import boxes_from_masks, crop_masks, masks_from_coco, warp_masks
from dataio.augment.target_maps import crop_resize_maps
from tests.augment.shape_photos import tight_boxes


def test_crop_masks_is_pils_nearest_resize_of_the_box() -> None:
    """Equal to ``Image.resize(NEAREST, box=...)``, mirrored, except where a sample falls exactly on a pixel
    border (PIL steps its coordinate by additions, so a tie may land on either side)."""
    rng = np.random.default_rng(0)
    for trial in range(200):
        height, width = (int(v) for v in rng.integers(5, 80, 2))
        mask = (rng.random((height, width)) < 0.5).astype(np.uint8)
        x0, y0 = rng.uniform(0, width - 1), rng.uniform(0, height - 1)
        box = np.array([x0, y0, rng.uniform(x0 + 0.5, width), rng.uniform(y0 + 0.5, height)])
        if trial % 2:
            box = np.maximum(np.round(box), [0, 0, np.round(x0) + 1, np.round(y0) + 1])
        out_w, out_h, flip = int(rng.integers(1, 60)), int(rng.integers(1, 60)), bool(trial % 3 == 0)
        pil = np.asarray(Image.fromarray(mask).resize((out_w, out_h), Image.NEAREST, box=tuple(box)))
        pil = pil[:, ::-1] if flip else pil
        ours = crop_masks(mask[None], box, flip, out_w, out_h)[0]
        columns = box[0] + (np.arange(out_w) + 0.5) * (box[2] - box[0]) / out_w
        rows = box[1] + (np.arange(out_h) + 0.5) * (box[3] - box[1]) / out_h
        columns = columns[::-1] if flip else columns
        tie = np.abs(rows - np.round(rows))[:, None] < 1e-9
        tie = tie | (np.abs(columns - np.round(columns))[None, :] < 1e-9)
        assert ((ours == pil) | tie).all(), trial


def walk(mask: np.ndarray, slot_maps: np.ndarray) -> np.ndarray:
    """``warp_masks`` for one mask, pixel by pixel: back through each slot, off where it left the image."""
    height, width = mask.shape
    out = np.zeros_like(mask)
    for i in range(height):
        for j in range(width):
            point, inside = np.array([j + 0.5, i + 0.5, 1.0]), True
            for forward in slot_maps[::-1]:
                point = np.linalg.solve(forward, point)
                inside &= bool(0 <= point[0] < width and 0 <= point[1] < height)
            if inside:
                out[i, j] = mask[int(np.floor(point[1])), int(np.floor(point[0]))]
    return out


def test_warp_masks_matches_a_per_pixel_walk_through_the_slots() -> None:
    rng = np.random.default_rng(1)
    masks = torch.from_numpy((rng.random((5, 23, 31)) < 0.4).astype(np.uint8))
    slot_maps = np.tile(np.eye(3), (3, 2, 1, 1))
    slot_maps[0, 0] = [[np.cos(0.4), -np.sin(0.4), 9], [np.sin(0.4), np.cos(0.4), -4], [0, 0, 1]]
    slot_maps[0, 1, 0, 1] = 0.3  # then a shear
    slot_maps[2, 1, 1, 2] = -6.5  # sample 1 untouched, sample 2 translated
    offsets = np.array([0, 2, 3, 5])
    warped = warp_masks(masks, offsets, slot_maps, chunk=2).numpy()
    for t, sample in enumerate([0, 0, 1, 2, 2]):
        assert np.array_equal(warped[t], walk(masks[t].numpy(), slot_maps[sample])), t
    assert np.array_equal(warped[2], masks[2].numpy())


def test_pixels_pushed_out_and_brought_back_stay_off() -> None:
    """The image's pixels there are the fill after the first slot: the mask's must be 0 too."""
    masks = torch.ones((1, 16, 20), dtype=torch.uint8)
    slot_maps = np.tile(np.eye(3), (1, 2, 1, 1))
    slot_maps[0, 0, 0, 2], slot_maps[0, 1, 0, 2] = 5.0, -5.0
    warped = warp_masks(masks, np.array([0, 1]), slot_maps)[0]
    assert (warped[:, 15:] == 0).all() and (warped[:, :15] == 1).all()


def test_coco_polygons_and_rle_decode_to_the_drawn_masks() -> None:
    coco_mask = pytest.importorskip("pycocotools.mask")
    height, width = 37, 53
    drawn = np.zeros((3, height, width), np.uint8)
    drawn[0, 5:20, 10:30] = 1
    drawn[1, 25:35, 2:9] = 1
    drawn[2, 1:4, 40:52] = 1
    compressed = coco_mask.encode(np.asfortranarray(drawn[1]))
    uncompressed = {"size": [height, width], "counts": _uncompressed_counts(drawn[2])}
    polygon = [[10, 5, 30, 5, 30, 20, 10, 20]]  # pixel corners of mask 0
    decoded = masks_from_coco([polygon, compressed, uncompressed], height, width)
    assert np.array_equal(decoded[1:], drawn[1:])
    assert (decoded[0] != drawn[0]).sum() <= 40  # COCO rasterises polygon edges by its own rule
    with pytest.raises(ValueError, match="segmentation 0 is"):
        masks_from_coco([{"size": [1, 1], "counts": "0"}], height, width)
    assert (tight_boxes(decoded[1:]) == boxes_from_masks(decoded[1:])).all()


def _uncompressed_counts(mask: np.ndarray) -> list[int]:
    flat = mask.flatten(order="F")
    changes = np.flatnonzero(np.diff(np.concatenate([[0], flat, [1 - flat[-1]]])))
    return np.diff(np.concatenate([[0], changes])).tolist()


def test_without_pycocotools_segmentations_are_refused_in_one_line(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pycocotools", None)
    with pytest.raises(ImportError) as caught:
        masks_from_coco([[[0, 0, 1, 0, 1, 1]]], 4, 4)
    assert "pip install 'torch-dataio[coco]'" in str(caught.value) and "\n" not in str(caught.value)


def test_crop_masks_agrees_with_the_box_maps() -> None:
    """A mask that is its box stays its box (within a pixel) through the crop: the same map for both."""
    mask = np.zeros((1, 300, 400), np.uint8)
    mask[0, 100:180, 50:210] = 1
    box, flip = np.array([30.0, 60.0, 330.0, 260.0]), True
    out = crop_masks(mask, box, flip, 96, 64)
    corners = crop_resize_maps(box[None], np.array([flip]), 96, 64)[0] @ np.array([[50, 210], [100, 180], [1, 1]])
    expected = [corners[0].min(), corners[1].min(), corners[0].max(), corners[1].max()]
    assert np.abs(boxes_from_masks(out)[0] - expected).max() <= 1
    assert (boxes_from_masks(np.zeros((2, 4, 4), np.uint8)) == 0).all()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_warp_masks_on_cuda_matches_the_cpu() -> None:
    rng = np.random.default_rng(2)
    masks = torch.from_numpy((rng.random((40, 64, 64)) < 0.5).astype(np.uint8))
    slot_maps = np.tile(np.eye(3), (8, 2, 1, 1))
    slot_maps[:, 0, :2, :2] = [[np.cos(0.3), -np.sin(0.3)], [np.sin(0.3), np.cos(0.3)]]
    slot_maps[:, 1, 0, 2] = rng.uniform(-10, 10, 8)
    offsets = np.arange(0, 41, 5)
    assert torch.equal(warp_masks(masks.cuda(), offsets, slot_maps).cpu(), warp_masks(masks, offsets, slot_maps))
