"""A tiny person_keypoints COCO folder: ``coco_folder``'s photos and boxes, with 5 named keypoints in each box."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NAMES = ["nose", "left_eye", "right_eye", "left_hand", "right_hand"]
SKELETON = [[1, 2], [1, 3], [2, 4], [3, 5]]
# where each keypoint sits in its box (fractions of its width and height) and its visibility
PLACES = ((0.5, 0.5, 2), (0.2, 0.3, 2), (0.8, 0.3, 1), (0.1, 0.9, 2), (0.9, 0.9, 0))


def keypoint_values(bbox: list[float]) -> list[float]:
    """The 3 x 5 keypoint values of a box (xywh): PLACES inside it, the unlabelled one (0, 0, 0) as COCO writes."""
    x, y, w, h = bbox
    values: list[float] = []
    for fx, fy, v in PLACES:
        values += [x + fx * w, y + fy * h, v] if v else [0, 0, 0]
    return values


def keypoint_document(instances: Path) -> dict:
    """``instances`` (an instances JSON) with keypoint names on its categories and keypoints on its annotations."""
    document = json.loads(instances.read_text())
    for category in document["categories"]:
        category.update(keypoints=NAMES, skeleton=SKELETON)
    for annotation in document["annotations"]:
        annotation["keypoints"] = keypoint_values(annotation["bbox"])
        annotation["num_keypoints"] = sum(v > 0 for _, _, v in PLACES)
    return document


@pytest.fixture(scope="session")
def keypoint_json(coco_folder, tmp_path_factory) -> Path:
    """``coco_folder``'s annotations as a person_keypoints JSON (the photos stay in ``coco_folder[0]``)."""
    path = tmp_path_factory.mktemp("keypoints") / "person_keypoints.json"
    path.write_text(json.dumps(keypoint_document(coco_folder[1])))
    return path


@pytest.fixture(scope="session")
def keypoint_shards(coco_folder, keypoint_json, tmp_path_factory) -> Path:
    """``keypoint_json`` converted (one worker, two shards)."""
    from dataio.formats.coco.coco_convert import ConvertCocoConfig, convert_coco

    out = tmp_path_factory.mktemp("keypoint_shards") / "out"
    convert_coco(ConvertCocoConfig(images=coco_folder[0], annotations=keypoint_json, out=out, max_shard_samples=6,
                                   num_workers=1, progress=False))
    return out
