"""Detection crops drawn on the host, constrained by box overlap: SSD's sampler, as DALI's ``random_bbox_crop``.

Each sample picks one option at random from ``thresholds`` (plus "no crop"
with ``allow_no_crop``) and tries ``num_attempts`` windows for it; if none
passes, it picks again, up to ``total_num_attempts`` windows in all. A window's
width and height are each ``scaling`` times the image's, with their ratio
(relative to the image's own, as DALI's without ``input_shape`` and SSD's
reference) in ``aspect_ratio``; it passes when the overlap metric of every box
(or of at least one, ``all_boxes_above_threshold=False``) with it is at least the
threshold: ``"iou"``, or ``"overlap"`` (the share of the box inside the window).
Two rules of SSD's reference implementation are kept where DALI differs:
a window must keep at least one box centre (the boxes whose centre falls
outside are dropped, so a crop never strips an image of all its objects), and
when every attempt failed the sample is not cropped (DALI takes its best
failed window, whose boxes may then all be dropped). Every draw has a fixed
shape, made at once for the batch from the caller's numpy Generator, so a
(seed, epoch, rank, step) generator gives the same crops on any machine.
Windows are whole pixels, so the turbo and DALI decoders crop exactly them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dataio.formats.errors import ConfigError

GROUP_ELEMENTS = 1 << 18  # (box, window) pairs weighed at once: ~25 MB of float64 arrays
MAX_ATTEMPTS = 1000  # windows drawn per sample at once (DALI's default is unlimited; SSD's reference tries 50)


@dataclass(frozen=True, kw_only=True)
class BBoxCropConfig:
    """The sampler's settings; the defaults are DALI's SSD example (thresholds 0-0.9, scaling 0.3-1)."""

    thresholds: tuple[float, ...] = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9)
    threshold_type: Literal["iou", "overlap"] = "iou"
    allow_no_crop: bool = True  # "no crop" is one more option to pick, as a threshold is
    scaling: tuple[float, float] = (0.3, 1.0)  # window side / image side, for each side
    aspect_ratio: tuple[float, float] = (0.5, 2.0)  # (window w / h) / (image w / h)
    num_attempts: int = 10  # windows tried per picked threshold
    total_num_attempts: int = 50  # windows tried in all before giving up (bounded: no endless loop)
    all_boxes_above_threshold: bool = True

    def __post_init__(self) -> None:
        self._check_types()
        if not self.thresholds or any(not 0 <= t <= 1 for t in self.thresholds):
            raise ConfigError("{0} must be one or more values in [0, 1], got " + repr(self.thresholds), "thresholds")
        if self.threshold_type not in ("iou", "overlap"):
            raise ConfigError("{0} must be 'iou' or 'overlap', got " + repr(self.threshold_type), "threshold_type")
        low, high = self.scaling
        if not 0 < low <= high <= 1:
            raise ConfigError(f"{{0}} must satisfy 0 < min <= max <= 1, got {self.scaling}", "scaling")
        low, high = self.aspect_ratio
        if not 0 < low <= high:
            raise ConfigError(f"{{0}} must satisfy 0 < min <= max, got {self.aspect_ratio}", "aspect_ratio")
        if self.num_attempts < 1:
            raise ConfigError(f"{{0}} must be >= 1, got {self.num_attempts}", "num_attempts")
        if self.total_num_attempts < 1:
            raise ConfigError(f"{{0}} must be >= 1, got {self.total_num_attempts}", "total_num_attempts")

    def _check_types(self) -> None:
        """Each setting of its type (a bool is no number here), before the ranges are compared: a string or a
        float count failed deep in numpy, and ``total_num_attempts`` sizes the (N, A, 4) windows drawn at once."""
        if not (isinstance(self.thresholds, tuple) and all(_real(t) for t in self.thresholds)):
            raise ConfigError(f"{{0}} must be a tuple of numbers, got {self.thresholds!r:.60}", "thresholds")
        for name in ("scaling", "aspect_ratio"):
            pair = getattr(self, name)
            if not (isinstance(pair, tuple) and len(pair) == 2 and all(_real(v) and math.isfinite(v) for v in pair)):
                raise ConfigError(f"{{0}} must be a (min, max) tuple of finite numbers, got {pair!r:.60}", name)
        for name in ("allow_no_crop", "all_boxes_above_threshold"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{{0}} must be True or False, got {getattr(self, name)!r:.20}", name)
        for name in ("num_attempts", "total_num_attempts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ATTEMPTS:
                raise ConfigError(f"{{0}} must be an int in 1..{MAX_ATTEMPTS}, got {value!r:.20}", name)


def _real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def bbox_crop_boxes(widths: np.ndarray, heights: np.ndarray, boxes: np.ndarray, counts: np.ndarray,
                    rng: np.random.Generator, config: BBoxCropConfig) -> tuple[np.ndarray, np.ndarray]:
    """(N, 4) whole-pixel crop windows x0, y0, x1, y1 for images of ``widths`` x ``heights``, and (T,) bool:
    which of the (T, 4) xyxy ``boxes`` (sample ``i`` owning the next ``counts[i]`` rows) keep their centre
    inside their sample's window."""
    widths, heights = np.asarray(widths, np.float64), np.asarray(heights, np.float64)
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    counts = np.asarray(counts, np.int64)
    n, c = len(widths), config
    rounds = math.ceil(c.total_num_attempts / c.num_attempts)
    attempts = rounds * c.num_attempts
    options = np.array(c.thresholds + ((np.inf,) if c.allow_no_crop else ()))  # inf: no crop
    threshold = np.repeat(options[rng.integers(0, len(options), (n, rounds))], c.num_attempts, axis=1)
    windows = _windows(widths, heights, rng, c, attempts)  # (N, A, 4)
    valid = np.isfinite(threshold) & _aspect_fits(windows, widths, heights, c.aspect_ratio)
    starts = np.concatenate([[0], np.cumsum(counts)])
    for lo, hi in _sample_groups(counts, attempts):  # (boxes, attempts) arrays a group at a time: bounded memory
        step = max(1, GROUP_ELEMENTS // max(1, int(starts[hi] - starts[lo])))  # a crowded sample: windows in slices
        for a in range(0, attempts, step):
            valid[lo:hi, a:a + step] &= _boxes_allow(boxes[starts[lo]:starts[hi]], counts[lo:hi],
                                                     windows[lo:hi, a:a + step], threshold[lo:hi, a:a + step], c)
    no_crop = ~np.isfinite(threshold) & (np.arange(attempts) % c.num_attempts == 0)  # a round's one outcome
    chosen = valid | no_crop
    first = np.argmax(chosen, axis=1)
    whole = np.stack([np.zeros(n), np.zeros(n), widths, heights], axis=1)
    found = chosen[np.arange(n), first] & ~no_crop[np.arange(n), first]
    crops = np.where(found[:, None], windows[np.arange(n), first], whole)
    return crops, _centres_inside(boxes, crops[np.repeat(np.arange(n), counts)])


def _sample_groups(counts: np.ndarray, attempts: int) -> list[tuple[int, int]]:
    """Consecutive samples (lo, hi) whose boxes times ``attempts`` stay within ``GROUP_ELEMENTS`` (a sample over
    it alone is a group of one, its windows then weighed in slices)."""
    groups, lo, held = [], 0, 0
    for i, count in enumerate(counts.tolist()):
        if i > lo and (held + count) * attempts > GROUP_ELEMENTS:
            groups.append((lo, i))
            lo, held = i, 0
        held += count
    return groups + [(lo, len(counts))] if len(counts) else groups


def _boxes_allow(boxes: np.ndarray, counts: np.ndarray, windows: np.ndarray, threshold: np.ndarray,
                 c: BBoxCropConfig) -> np.ndarray:
    """(n, A) whether each sample's boxes pass each of its windows (every box, or one, over the threshold, and
    one box centre inside); samples without boxes pass any."""
    owners = np.repeat(np.arange(len(counts)), counts)
    per_box = windows[owners]  # (T, A, 4)
    passes = _metric(boxes[:, None, :], per_box, c.threshold_type) >= threshold[owners]
    any_centre = _per_sample_sum(_centres_inside(boxes[:, None, :], per_box), counts) > 0
    meets = _per_sample_sum(~passes, counts) == 0 if c.all_boxes_above_threshold else \
        _per_sample_sum(passes, counts) > 0
    return np.where((counts > 0)[:, None], meets & any_centre, True)


def _windows(widths: np.ndarray, heights: np.ndarray, rng: np.random.Generator, c: BBoxCropConfig,
             attempts: int) -> np.ndarray:
    """(N, A, 4) whole-pixel candidate windows, each side ``scaling`` of the image's, placed uniformly."""
    n = len(widths)
    scale = rng.uniform(c.scaling[0], c.scaling[1], (n, attempts, 2))
    w = np.clip(np.round(scale[..., 0] * widths[:, None]), 1, widths[:, None])
    h = np.clip(np.round(scale[..., 1] * heights[:, None]), 1, heights[:, None])
    place = rng.random((n, attempts, 2))
    x0 = np.floor(place[..., 0] * (widths[:, None] - w + 1))
    y0 = np.floor(place[..., 1] * (heights[:, None] - h + 1))
    return np.stack([x0, y0, x0 + w, y0 + h], axis=-1)


def _aspect_fits(windows: np.ndarray, widths: np.ndarray, heights: np.ndarray,
                 bounds: tuple[float, float]) -> np.ndarray:
    """(N, A) whether each window's w/h, relative to its image's, is in ``bounds``."""
    relative_w = (windows[..., 2] - windows[..., 0]) / widths[:, None]
    relative_h = (windows[..., 3] - windows[..., 1]) / heights[:, None]
    ratio = relative_w / relative_h
    return (ratio >= bounds[0]) & (ratio <= bounds[1])


def _metric(boxes: np.ndarray, windows: np.ndarray, kind: str) -> np.ndarray:
    """IoU of boxes and windows, or the share of each box inside its window (0 for an empty box)."""
    left, top = np.maximum(boxes[..., 0], windows[..., 0]), np.maximum(boxes[..., 1], windows[..., 1])
    right, bottom = np.minimum(boxes[..., 2], windows[..., 2]), np.minimum(boxes[..., 3], windows[..., 3])
    inter = np.maximum(right - left, 0) * np.maximum(bottom - top, 0)
    box_area = np.maximum(boxes[..., 2] - boxes[..., 0], 0) * np.maximum(boxes[..., 3] - boxes[..., 1], 0)
    if kind == "overlap":
        whole = box_area
    else:
        whole = box_area + (windows[..., 2] - windows[..., 0]) * (windows[..., 3] - windows[..., 1]) - inter
    return np.divide(inter, whole, out=np.zeros_like(inter), where=whole > 0)


def _centres_inside(boxes: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """Whether each box's centre is strictly inside its window (SSD's rule, as torchvision's RandomIoUCrop)."""
    cx, cy = (boxes[..., 0] + boxes[..., 2]) / 2, (boxes[..., 1] + boxes[..., 3]) / 2
    return (cx > windows[..., 0]) & (cx < windows[..., 2]) & (cy > windows[..., 1]) & (cy < windows[..., 3])


def _per_sample_sum(flags: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(N, A) counts of true (T, A) ``flags`` per sample (a cumulative sum: empty samples count 0)."""
    cumulative = np.concatenate([np.zeros((1, flags.shape[1]), np.int64), np.cumsum(flags, axis=0)])
    ends = np.cumsum(counts)
    return cumulative[ends] - cumulative[ends - counts]
