"""COCO keypoints that follow every crop, resize, flip and warp their boxes take, by the same affine maps.

A batch's keypoints are one (T, K, 3) float array, a row per box (lined up with
``box_targets.BoxTargets``' rows, so a box dropped drops its row here by the same
index): x, y in continuous pixels (the boxes' frame: torchvision's keypoint
R-CNN references flip both by ``width - x``) and COCO's visibility (0 not
labelled, 1 labelled and hidden, 2 visible). Each stage maps a point by its
sample's map (``target_maps``) and sets the visibility of a point that leaves
the stage's image to 0 (and its x, y to 0, COCO's form of an unlabelled point):
torchvision's keypoint head trains on points with visibility > 0 only. A map
that mirrors (negative determinant: a horizontal flip, an EXIF mirror) also
swaps each left point with its right one (``coco_keypoints.flip_indices``), as torchvision's
references do with ``flip_inds``: the person's left ear is still the left ear.
"""

from __future__ import annotations

import numpy as np


def map_keypoints(points: np.ndarray, maps: np.ndarray, widths: np.ndarray, heights: np.ndarray,
                  flips: np.ndarray) -> np.ndarray:
    """(T, K, 3) keypoints through each row's own (T, 3, 3) ``maps``, into images of (T,) ``widths`` x ``heights``:
    points outside ``[0, width] x [0, height]`` (or unlabelled) become (0, 0, 0); rows whose map mirrors are
    reordered by ``flips`` (``coco_keypoints.flip_indices``)."""
    points = np.asarray(points, np.float64)
    maps = np.asarray(maps, np.float64)
    if len(points) == 0:
        return np.zeros((0, len(flips), 3))
    xy = np.einsum("tij,tkj->tki", maps[:, :2, :2], points[..., :2]) + maps[:, None, :2, 2]
    width, height = np.asarray(widths, np.float64)[:, None], np.asarray(heights, np.float64)[:, None]
    inside = (xy[..., 0] >= 0) & (xy[..., 0] <= width) & (xy[..., 1] >= 0) & (xy[..., 1] <= height)
    seen = inside & (points[..., 2] > 0)
    out = np.where(seen[..., None], np.concatenate([xy, points[..., 2:]], axis=-1), 0.0)
    mirrored = np.linalg.det(maps[:, :2, :2]) < 0
    out[mirrored] = out[mirrored][:, flips]
    return out


def map_sample_keypoints(points: np.ndarray, owners: np.ndarray, maps: np.ndarray, width: np.ndarray | int,
                         height: np.ndarray | int, flips: np.ndarray) -> np.ndarray:
    """``map_keypoints`` with one map per sample: row ``t`` belongs to sample ``owners[t]``, ``maps`` is (N, 3, 3),
    the output size one for all or (N,)."""
    n = len(maps)
    widths = np.broadcast_to(np.asarray(width, np.float64), (n,))[owners]
    heights = np.broadcast_to(np.asarray(height, np.float64), (n,))[owners]
    return map_keypoints(points, np.asarray(maps, np.float64)[owners], widths, heights, flips)


def map_keypoints_in_slots(points: np.ndarray, owners: np.ndarray, slot_maps: np.ndarray, width: int, height: int,
                           flips: np.ndarray) -> np.ndarray:
    """Keypoints through a chain of same-size stages (``target_maps.randaugment_maps``' (N, S, 3, 3)), each slot
    clipping, as ``BoxTargets.mapped_in_slots`` moves the boxes."""
    for slot in range(slot_maps.shape[1]):
        if not np.allclose(slot_maps[:, slot], np.eye(3)):
            points = map_sample_keypoints(points, owners, slot_maps[:, slot], width, height, flips)
    return points


def padded_keypoints(points: np.ndarray, offsets: np.ndarray, slots: int) -> np.ndarray:
    """(N, slots, K, 3) float32: sample ``i``'s rows ``offsets[i]:offsets[i + 1]`` in its first slots, zeros after
    (as ``BoxTargets.padded`` lays out the boxes, so ``keypoints[valid]`` lines up with ``boxes[valid]``)."""
    counts = np.diff(offsets)
    owners = np.repeat(np.arange(len(counts)), counts)
    slot = np.arange(len(points)) - offsets[:-1][owners]
    out = np.zeros((len(counts), slots, *points.shape[1:]), np.float32)
    out[owners, slot] = points
    return out
