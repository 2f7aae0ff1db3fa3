"""Detection boxes of a batch that follow every crop, resize, flip and affine warp of their images.

Layout: ragged, one row per box, sample ``i`` owning rows ``offsets[i]:offsets[i + 1]``
(``owners()`` gives each row's sample). A batch's boxes vary in number per
image; ragged rows are vectorised over the whole batch without padding to the
busiest image, dropping a box is one boolean index, and the rows line up with
per-object masks (``mask_targets``) and labels. ``padded()`` gives the
(N, K, 4) + validity form that batched losses take.

Each row is tracked as the convex polygon of its box's visible part
(``convex_clip``): every stage maps it by the sample's affine map and clips it
to that stage's image, so ``boxes()`` (the polygons' envelopes) is exactly the
axis-aligned bounds of what is left of the transformed box (the envelope of
its transformed corners, clipped, and tighter where a warp pushed a corner out),
and the visible fraction is the polygon's area over the area the box would
have had with nothing clipped (the product of the maps' determinants). Boxes
are in continuous pixel coordinates (``target_maps``): xyxy, COCO's frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dataio.augment.convex_clip import apply_maps, box_corners, clip_to_rectangles, envelopes, polygon_areas


@dataclass(frozen=True)
class BoxTargets:
    """A batch's boxes as visible polygons, with labels; build with ``from_ragged`` or ``from_lists``."""

    polygons: np.ndarray  # (T, V, 2) float64: each box's visible part in the current images' pixels
    full_areas: np.ndarray  # (T,) float64: each box's area mapped through every stage without clipping
    labels: np.ndarray  # (T,) int64
    offsets: np.ndarray  # (N + 1,) int64: sample i owns rows offsets[i]:offsets[i + 1]

    @classmethod
    def from_ragged(cls, boxes: np.ndarray, labels: np.ndarray, counts: np.ndarray, widths: np.ndarray,
                    heights: np.ndarray) -> BoxTargets:
        """(T, 4) xyxy boxes in source pixels, sample ``i`` owning the next ``counts[i]`` rows.

        ``widths``/``heights`` (N,) are the source images'; boxes are clipped to them first (COCO
        boxes may pass the edge by rounding). A box with x1 <= x0 or y1 <= y0 is kept as a
        degenerate row (``kept`` drops it). Raises ValueError naming the row of a non-finite box.
        """
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        labels = np.asarray(labels, dtype=np.int64).reshape(-1)
        counts = np.asarray(counts, dtype=np.int64).reshape(-1)
        if len(labels) != len(boxes) or int(counts.sum()) != len(boxes) or (counts < 0).any():
            raise ValueError(f"{len(boxes)} boxes, {len(labels)} labels and counts summing to {int(counts.sum())} "
                             "disagree")
        bad = np.flatnonzero(~np.isfinite(boxes).all(axis=1))
        if len(bad):
            raise ValueError(f"box {int(bad[0])} is not finite: {boxes[bad[0]].tolist()}")
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        owners = np.repeat(np.arange(len(counts)), counts)
        sizes = np.maximum(boxes[:, 2:] - boxes[:, :2], 0.0)
        full_areas = sizes[:, 0] * sizes[:, 1]
        ordered = np.concatenate([boxes[:, :2], np.maximum(boxes[:, 2:], boxes[:, :2])], axis=1)
        polygons = clip_to_rectangles(box_corners(ordered), np.asarray(widths, np.float64)[owners],
                                      np.asarray(heights, np.float64)[owners])
        return cls(polygons, full_areas, labels, offsets)

    @classmethod
    def from_lists(cls, boxes: list[np.ndarray], labels: list[np.ndarray], widths: np.ndarray,
                   heights: np.ndarray) -> BoxTargets:
        """One (K_i, 4) array of boxes and one (K_i,) array of labels per sample (K_i may be 0)."""
        counts = np.array([len(np.asarray(b).reshape(-1, 4)) for b in boxes], dtype=np.int64)
        stacked = np.concatenate([np.asarray(b, np.float64).reshape(-1, 4) for b in boxes]) if boxes else \
            np.zeros((0, 4))
        flat = np.concatenate([np.asarray(lab, np.int64).reshape(-1) for lab in labels]) if labels else \
            np.zeros(0, np.int64)
        return cls.from_ragged(stacked, flat, counts, widths, heights)

    @property
    def num_samples(self) -> int:
        return len(self.offsets) - 1

    def owners(self) -> np.ndarray:
        """(T,) the sample of each row."""
        return np.repeat(np.arange(self.num_samples), np.diff(self.offsets))

    def mapped(self, maps: np.ndarray, out_width: np.ndarray | int, out_height: np.ndarray | int) -> BoxTargets:
        """The boxes after one stage: sample ``i``'s boxes through ``maps[i]`` ((N, 3, 3), ``target_maps``), then
        clipped to the stage's output of ``out_width`` x ``out_height`` (one for all, or (N,))."""
        maps = np.asarray(maps, dtype=np.float64)
        if maps.shape != (self.num_samples, 3, 3):
            raise ValueError(f"expected ({self.num_samples}, 3, 3) maps, got {maps.shape}")
        owners = self.owners()
        per_row = maps[owners]
        widths = np.broadcast_to(np.asarray(out_width, np.float64), (self.num_samples,))[owners]
        heights = np.broadcast_to(np.asarray(out_height, np.float64), (self.num_samples,))[owners]
        polygons = clip_to_rectangles(apply_maps(self.polygons, per_row), widths, heights)
        scale = np.abs(np.linalg.det(per_row[:, :2, :2])) if len(per_row) else np.zeros(0)
        return BoxTargets(polygons, self.full_areas * scale, self.labels, self.offsets)

    def mapped_in_slots(self, slot_maps: np.ndarray, width: int, height: int) -> BoxTargets:
        """The boxes after a chain of same-size stages, slot by slot: ``slot_maps`` (N, K, 3, 3) as
        ``target_maps.randaugment_maps`` gives them (each slot clips, as each image op fills)."""
        targets = self
        for slot in range(slot_maps.shape[1]):
            if not np.allclose(slot_maps[:, slot], np.eye(3)):
                targets = targets.mapped(slot_maps[:, slot], width, height)
        return targets

    def boxes(self) -> np.ndarray:
        """(T, 4) float32 xyxy: the bounds of each box's visible part."""
        return envelopes(self.polygons).astype(np.float32)

    def visible_fractions(self) -> np.ndarray:
        """(T,) the share of each box's mapped area still inside the image (0 for a degenerate box)."""
        areas = polygon_areas(self.polygons)
        return np.divide(areas, self.full_areas, out=np.zeros_like(areas), where=self.full_areas > 0)

    def kept(self, min_visible: float = 0.0, min_side: float = 0.0) -> tuple[BoxTargets, np.ndarray]:
        """Drop boxes with a visible fraction under ``min_visible`` or a side of at most ``min_side`` pixels
        (so always those of zero width or height); returns the rest and the kept rows' indices (for the
        matching masks and any other per-box field)."""
        if not 0 <= min_visible <= 1 or min_side < 0:
            raise ValueError(f"min_visible must be in [0, 1] and min_side >= 0, got {min_visible} and {min_side}")
        sizes = np.diff(envelopes(self.polygons).reshape(-1, 2, 2), axis=1).reshape(-1, 2)
        keep = (self.visible_fractions() >= min_visible) & (sizes > min_side).all(axis=1)
        index = np.flatnonzero(keep)
        counts = np.bincount(self.owners()[index], minlength=self.num_samples)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return BoxTargets(self.polygons[index], self.full_areas[index], self.labels[index], offsets), index

    def select(self, rows: np.ndarray) -> BoxTargets:
        """Only the rows where ``rows`` (T,) bool is true (e.g. ``bbox_crop``'s centre rule)."""
        index = np.flatnonzero(np.asarray(rows, dtype=bool))
        counts = np.bincount(self.owners()[index], minlength=self.num_samples)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return BoxTargets(self.polygons[index], self.full_areas[index], self.labels[index], offsets)

    def per_sample(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """[(boxes (K_i, 4) float32, labels (K_i,) int64)] per sample: torchvision's detection target form."""
        boxes = self.boxes()
        return [(boxes[a:b], self.labels[a:b]) for a, b in zip(self.offsets[:-1], self.offsets[1:], strict=True)]

    def padded(self, max_boxes: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(boxes (N, K, 4) float32, labels (N, K) int64 with -1 for padding, valid (N, K) bool); K is the
        busiest sample's count, or ``max_boxes`` (a sample with more raises ValueError)."""
        counts = np.diff(self.offsets)
        k = int(counts.max(initial=0)) if max_boxes is None else max_boxes
        if counts.max(initial=0) > k:
            raise ValueError(f"a sample has {int(counts.max())} boxes, more than max_boxes={k}")
        slot = np.arange(len(self.labels)) - self.offsets[:-1][self.owners()]
        boxes = np.zeros((self.num_samples, k, 4), np.float32)
        labels = np.full((self.num_samples, k), -1, np.int64)
        valid = np.zeros((self.num_samples, k), bool)
        boxes[self.owners(), slot], labels[self.owners(), slot], valid[self.owners(), slot] = \
            self.boxes(), self.labels, True
        return boxes, labels, valid
