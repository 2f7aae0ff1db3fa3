"""Convex polygons in a batch: mapped by affine maps, clipped to rectangles, measured; all vectorised.

A box that an affine map rotates or shears is a parallelogram, and the part of
it left inside the image is a convex polygon. Tracking that polygon (rather
than the box's axis-aligned envelope at each stage) keeps the final envelope
exactly the bounds of the visible part of the transformed box, however many
warps and clips it went through, and its area gives the visible fraction.

Polygons are (T, V, 2) float64 arrays. One with fewer than V corners repeats
its last corner: a repeated corner adds a zero-length edge, which changes
neither clipping, area nor envelope, so every row can be processed at once. A
polygon clipped away entirely becomes V copies of one point (area 0).
"""

from __future__ import annotations

import numpy as np


def box_corners(boxes: np.ndarray) -> np.ndarray:
    """(T, 4, 2) corners of (T, 4) x0, y0, x1, y1 boxes, in order around the box."""
    x0, y0, x1, y1 = (boxes[:, i] for i in range(4))
    return np.stack([np.stack([x0, y0], -1), np.stack([x1, y0], -1), np.stack([x1, y1], -1),
                     np.stack([x0, y1], -1)], axis=1)


def apply_maps(polygons: np.ndarray, maps: np.ndarray) -> np.ndarray:
    """Each polygon's corners through its own (T, 3, 3) affine map."""
    return np.einsum("tij,tvj->tvi", maps[:, :2, :2], polygons) + maps[:, None, :2, 2]


def clip_to_rectangles(polygons: np.ndarray, widths: np.ndarray, heights: np.ndarray) -> np.ndarray:
    """Each convex polygon cut to ``[0, width] x [0, height]`` (Sutherland-Hodgman, one half-plane at a time)."""
    for axis, limit, keep_above in ((0, 0.0, True), (0, widths, False), (1, 0.0, True), (1, heights, False)):
        polygons = _clip_half_plane(polygons, axis, np.broadcast_to(np.asarray(limit, np.float64),
                                                                     (len(polygons),)), keep_above)
    return polygons


def _clip_half_plane(polygons: np.ndarray, axis: int, limit: np.ndarray, keep_above: bool) -> np.ndarray:
    """Keep the part with ``coordinate >= limit`` (``keep_above``) or ``<= limit``.

    Each corner is kept if inside, followed by the crossing point of its edge to the next corner
    if the edge crosses the line; the kept points are then packed to the front of the row.
    """
    if polygons.shape[1] == 0 or len(polygons) == 0:
        return polygons
    side = polygons[..., axis] - limit[:, None]
    if not keep_above:
        side = -side
    inside = side >= 0
    following = np.roll(polygons, -1, axis=1)
    side_next, inside_next = np.roll(side, -1, axis=1), np.roll(inside, -1, axis=1)
    crosses = inside != inside_next
    t = np.where(crosses, side / np.where(crosses, side - side_next, 1.0), 0.0)
    crossing = polygons + (following - polygons) * t[..., None]
    crossing[..., axis] = np.where(crosses, limit[:, None], crossing[..., axis])  # exactly on the line
    points = np.stack([polygons, crossing], axis=2).reshape(len(polygons), -1, 2)
    kept = np.stack([inside, crosses], axis=2).reshape(len(polygons), -1)
    return _pack(points, kept)


def _pack(points: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """The kept points of each row, in order, padded by repeating the last (a row with none: the origin)."""
    counts = kept.sum(axis=1)
    width = max(int(counts.max(initial=0)), 1)
    order = np.argsort(~kept, axis=1, kind="stable")[:, :width]
    packed = np.take_along_axis(points, order[..., None], axis=1)
    slot = np.arange(width)[None, :]
    last = np.take_along_axis(packed, np.maximum(counts - 1, 0)[:, None, None], axis=1)
    packed = np.where((slot < counts[:, None])[..., None], packed, last)
    return np.where((counts > 0)[:, None, None], packed, 0.0)


def polygon_areas(polygons: np.ndarray) -> np.ndarray:
    """(T,) areas (shoelace); repeated corners add nothing, orientation does not matter."""
    if polygons.shape[1] == 0:
        return np.zeros(len(polygons))
    x, y = polygons[..., 0], polygons[..., 1]
    return 0.5 * np.abs((x * np.roll(y, -1, axis=1) - np.roll(x, -1, axis=1) * y).sum(axis=1))


def envelopes(polygons: np.ndarray) -> np.ndarray:
    """(T, 4) axis-aligned bounds x0, y0, x1, y1 of each polygon."""
    if len(polygons) == 0:
        return np.zeros((0, 4))
    return np.concatenate([polygons.min(axis=1), polygons.max(axis=1)], axis=1)
