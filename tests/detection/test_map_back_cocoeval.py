"""Keypoints and masks of a letterboxed evaluation view mapped back to the annotation's pixels score as
pycocotools' COCOeval scores the ground truth itself (issue 43): OKS AP 1.000 for keypoints (the exact inverse of
the view's affine map), mask AP near 1 for masks (sampled back at the original size: the view's resampling loses
the edges' pixels, so not exactly 1)."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import dataio
from dataio.detection.map_back import keypoints_to_original, masks_to_original
from tests.keypoint_fixtures import NAMES

EVAL = dict(batch_size=5, train=False, seed=0, num_workers=1)


def scored(annotations, results: list[dict], kind: str) -> list[float]:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        truth = COCO(str(annotations))
        evaluation = COCOeval(truth, truth.loadRes(results), kind)
        if kind == "keypoints":  # COCO's sigmas are for its 17 person points; these folders have 5
            evaluation.params.kpt_oks_sigmas = np.full(len(NAMES), 0.05)
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return [float(v) for v in evaluation.stats]


def test_keypoints_mapped_back_from_a_letterbox_score_oks_ap_one(keypoint_json, keypoint_shards) -> None:
    results = []
    with dataio.DetectionLoader(keypoint_shards, image_size=(96, 160), **EVAL,
                                targets=dataio.DetectionConfig(eval_crop="letterbox")) as loader:
        for batch in loader:
            per_image = [k[v] for k, v in zip(batch["keypoints"], batch["valid"], strict=True)]
            for i, points in enumerate(keypoints_to_original(per_image, batch)):
                labels = batch["labels"][i][batch["valid"][i]]
                for row, label in zip(points.tolist(), labels.tolist(), strict=True):
                    results.append({"image_id": int(batch["image_id"][i]), "score": 1.0, "keypoints": sum(row, []),
                                    "category_id": loader.category_ids[label]})
    assert scored(keypoint_json, results, "keypoints")[0] == pytest.approx(1.0)


def test_masks_mapped_back_from_a_letterbox_score_mask_ap_near_one(coco_folder, coco_shards) -> None:
    from pycocotools import mask as coco_mask

    results = []
    with dataio.DetectionLoader(coco_shards, image_size=(240, 320), **EVAL,
                                targets=dataio.DetectionConfig(eval_crop="letterbox", masks=True)) as loader:
        for batch in loader:
            per_image = batch["masks"].split(batch["num_boxes"].tolist())
            for i, masks in enumerate(masks_to_original(list(per_image), batch)):
                height, width = batch["orig_size"][i].tolist()
                assert masks.shape[1:] == (height, width)
                labels = batch["labels"][i][batch["valid"][i]]
                for mask, label in zip(masks.numpy(), labels.tolist(), strict=True):
                    rle = coco_mask.encode(np.asfortranarray(mask))
                    rle["counts"] = rle["counts"].decode()
                    results.append({"image_id": int(batch["image_id"][i]), "score": 1.0, "segmentation": rle,
                                    "category_id": loader.category_ids[label]})
    stats = scored(coco_folder[1], results, "segm")
    assert stats[1] == pytest.approx(1.0) and stats[0] >= 0.99, stats  # AP@0.5 1.000, AP 0.9975 here
