"""COCO keypoints (person_keypoints JSON) checked: the categories' keypoint names and skeleton, each annotation's
x, y, visibility triplets.

A file whose categories list ``keypoints`` (names) has them all the same (one
set of points a folder; COCO's person_keypoints has one category) and, where
given, a ``skeleton`` of 1-based index pairs into them. Each annotation's
``keypoints`` must be 3 x K finite numbers with visibility 0, 1 or 2, its
labelled points inside the image (by ``EDGE_SLACK``), and ``num_keypoints``,
where given, the count of labelled ones: else that annotation alone is rejected
with its reason, as a bad ``bbox`` is. An annotation without ``keypoints`` (a
category without points) is stored with K unlabelled points; a category whose ``keypoints`` is ``[]`` (as
Datumaro's and CVAT's exports write for box-only categories) names no points, as a missing list. Unlabelled
points are stored as (0, 0, 0), COCO's own form. A file that has keypoints on annotations
but names none in its categories stops in one line (the points would be
dropped unread).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dataio.formats.errors import DataioError

MAX_KEYPOINTS = 1024  # names a category may list: COCO's person has 17, whole-body sets 133
EDGE_SLACK = 1.0  # pixels a labelled point may pass the image's edge by (coco_json's for boxes)
SIDES = (("left", "right"), ("Left", "Right"), ("LEFT", "RIGHT"))


@dataclass(frozen=True)
class KeypointNames:
    """The names of a file's keypoints (K) and its skeleton (pairs of 1-based indices, COCO's form)."""

    names: tuple[str, ...]
    skeleton: tuple[tuple[int, int], ...]


def keypoint_names(categories: list, annotations: list, where: str) -> KeypointNames | None:
    """The keypoint names the categories list (None for a plain instances file); DataioError in one line for names
    that differ between categories, a bad skeleton, or keypoints on annotations with no names to read them by."""
    found: KeypointNames | None = None
    for i, entry in enumerate(categories):
        if not isinstance(entry, dict) or entry.get("keypoints") is None:
            continue
        if entry["keypoints"] == [] and not entry.get("skeleton"):
            continue  # names no points: Datumaro's (CVAT's) export writes [] for each category without points
        names, skeleton = entry["keypoints"], entry.get("skeleton") or []
        if not (isinstance(names, list) and 0 < len(names) <= MAX_KEYPOINTS
                and all(isinstance(n, str) and n and "\n" not in n for n in names) and len(set(names)) == len(names)):
            raise DataioError(f"{where}: categories[{i}].keypoints is not a list of 1 to {MAX_KEYPOINTS} distinct "
                              "one-line names")
        if not (isinstance(skeleton, list) and all(
                isinstance(p, list) and len(p) == 2 and all(_integer(v) and 1 <= v <= len(names) for v in p)
                for p in skeleton)):
            raise DataioError(f"{where}: categories[{i}].skeleton is not a list of [a, b] pairs of keypoint numbers "
                              f"1..{len(names)}")
        this = KeypointNames(tuple(names), tuple((a, b) for a, b in skeleton))
        if found is not None and this != found:
            raise DataioError(f"{where}: categories[{i}] lists other keypoint names or skeleton than an earlier "
                              "category (a folder holds one set of keypoints)")
        found = this
    if found is None:
        for i, entry in enumerate(annotations):
            if isinstance(entry, dict) and entry.get("keypoints") not in (None, []):
                raise DataioError(f"{where}: annotations[{i}] holds keypoints but no category lists keypoint names "
                                  "(categories[].keypoints): they cannot be read")
    return found


def keypoint_options(names: KeypointNames | None) -> dict[str, Any]:
    """The manifest options a folder with keypoints records (none for a plain instances file): the names, in
    stored order, and the skeleton (1-based pairs, COCO's form)."""
    if names is None:
        return {}
    return {"keypoints": list(names.names), "skeleton": [list(pair) for pair in names.skeleton]}


def checked_keypoints(entry: dict, count: int, width: int, height: int) -> tuple[float, ...]:
    """The annotation's 3 x ``count`` keypoint values (x, y, v per point; unlabelled ones 0, 0, 0); ValueError
    with the reason for values that are not COCO keypoints of a ``width`` x ``height`` image."""
    raw = entry.get("keypoints")
    if raw is None or raw == []:
        return (0.0,) * (3 * count)
    if not isinstance(raw, list) or len(raw) != 3 * count:
        size = len(raw) if isinstance(raw, list) else type(raw).__name__
        raise ValueError(f"keypoints hold {size} values, not 3 x {count} (x, y, visibility for each of the "
                         f"category's {count} keypoints)")
    if not all(_number(v) for v in raw):
        raise ValueError("keypoints are not all finite numbers")
    values: list[float] = []
    labelled = 0
    for k in range(count):
        x, y, v = (float(value) for value in raw[3 * k:3 * k + 3])
        if v not in (0.0, 1.0, 2.0):
            raise ValueError(f"keypoint {k}'s visibility {raw[3 * k + 2]!r:.20} is not 0, 1 or 2")
        if v == 0:
            values += (0.0, 0.0, 0.0)
            continue
        if not (-EDGE_SLACK <= x <= width + EDGE_SLACK and -EDGE_SLACK <= y <= height + EDGE_SLACK):
            raise ValueError(f"keypoint {k} ({x:g}, {y:g}) lies outside the {width}x{height} image")
        labelled += 1
        values += (min(max(x, 0.0), width), min(max(y, 0.0), height), v)
    stated = entry.get("num_keypoints")
    if stated is not None and stated != labelled:
        raise ValueError(f"num_keypoints is {stated!r:.20} but {labelled} keypoints are labelled")
    return tuple(values)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def flip_indices(names: Sequence[str]) -> np.ndarray:
    """(K,) where each keypoint goes on a mirror: a name with "left" swapped with the same name with "right"
    (COCO's ``left_eye``/``right_eye``), any other name to itself. For COCO's 17 person keypoints this is
    torchvision's references' ``flip_inds``."""
    where = {name: i for i, name in enumerate(names)}
    out = np.arange(len(names), dtype=np.int64)
    for i, name in enumerate(names):
        for left, right in SIDES:
            partner = (name.replace(left, right) if left in name else
                       name.replace(right, left) if right in name else None)
            if partner is not None and partner in where:
                out[i] = where[partner]
                break
    return out
