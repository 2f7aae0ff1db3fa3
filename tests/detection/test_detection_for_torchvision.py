"""What torchvision's detection models and COCO's evaluation take, from the detection loader by default (issue 43):
[0, 1] float images, each eval image's frame to map detections back (scored by pycocotools' COCOeval), a
keep-ratio letterbox view, Faster R-CNN's flip-only training crop, and ``(images, targets)`` lists."""

from __future__ import annotations

import contextlib
import io
import json
import sys

import numpy as np
import pytest
import torch

import dataio
from dataio import ShardDataset
from dataio.augment.letterbox import letterbox_places
from dataio.detection import tv_targets
from dataio.detection.map_back import to_original
from dataio.formats.errors import ConfigError

EVAL = dict(batch_size=5, image_size=96, train=False, seed=0, num_workers=1)


def test_detection_batches_are_zero_one_floats_by_default(coco_shards) -> None:
    with dataio.DetectionLoader(coco_shards, **EVAL) as loader:
        images = torch.cat([batch["image"] for batch in loader])
    assert images.dtype == torch.float32 and 0 <= float(images.min()) and float(images.max()) <= 1
    with dataio.DataLoader(coco_shards, batch_size=4, image_size=64) as loader:  # the drop-in: not normalised
        image = next(iter(loader))["image"]
    assert image.dtype == torch.float32 and 0 <= float(image.min()) and float(image.max()) <= 1
    with dataio.DetectionLoader(coco_shards, targets=dataio.DetectionConfig(pixels="uint8"), **EVAL) as loader:
        raw = torch.cat([batch["image"] for batch in loader])
    assert raw.dtype == torch.uint8 and torch.equal(raw.float().div(255), images)
    with dataio.DetectionLoader(coco_shards, normalize=True, **EVAL) as loader:  # for models that do not normalise
        assert float(next(iter(loader))["image"].min()) < -1


def test_without_torchvision_items_hold_plain_tensors(coco_shards, monkeypatch) -> None:
    assert "torchvision" not in sys.modules  # this process has none: plain tensors, as before
    sample = ShardDataset(coco_shards, targets=dataio.DetectionConfig(masks=True))[0]
    assert type(sample["boxes"]) is torch.Tensor and type(sample["masks"]) is torch.Tensor
    monkeypatch.setitem(sys.modules, "torchvision", None)  # an import that raises: "not there" too
    monkeypatch.setattr(tv_targets, "_found", {})
    assert tv_targets.tv_tensors() is None
    assert type(ShardDataset(coco_shards)[0]["boxes"]) is torch.Tensor


def coco_results(loader: dataio.DetectionLoader, mapping) -> list[dict]:
    """The eval loader's ground-truth boxes as detections of score 1, through ``mapping(boxes, batch)``."""
    results = []
    for batch in loader:
        for image_id, boxes, labels in zip(batch["image_id"].tolist(), mapping(
                [b[v] for b, v in zip(batch["boxes"], batch["valid"], strict=True)], batch),
                [label[v] for label, v in zip(batch["labels"], batch["valid"], strict=True)], strict=True):
            for (x0, y0, x1, y1), label in zip(boxes.tolist(), labels.tolist(), strict=True):
                results.append({"image_id": image_id, "category_id": loader.category_ids[label],
                                "bbox": [x0, y0, x1 - x0, y1 - y0], "score": 1.0})
    return results


def average_precision(annotations, results: list[dict]) -> float:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        truth = COCO(str(annotations))
        evaluation = COCOeval(truth, truth.loadRes(results), "bbox")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return float(evaluation.stats[0])


@pytest.mark.parametrize("view", ["whole", "letterbox"])
def test_boxes_mapped_back_score_ap_one_with_cocoeval(coco_folder, coco_shards, view) -> None:
    with dataio.DetectionLoader(coco_shards, targets=dataio.DetectionConfig(eval_crop=view), **EVAL) as loader:
        assert loader.category_ids == tuple(c["id"] for c in json.loads(coco_folder[1].read_text())["categories"])
        assert average_precision(coco_folder[1], coco_results(loader, to_original)) == pytest.approx(1.0)
        if view == "letterbox":  # the scale alone, the padding forgotten: a wrong mapping scores below
            wrong = coco_results(loader, lambda boxes, b: [x / b["scale"][i].repeat(2) for i, x in enumerate(boxes)])
            assert average_precision(coco_folder[1], wrong) < 0.5


def test_letterbox_keeps_the_ratio_and_boxes_follow_scale_and_offset(coco_shards) -> None:
    whole = ShardDataset(coco_shards, targets=dataio.DetectionConfig(masks=True))
    options = dataio.DetectionConfig(eval_crop="letterbox", masks=True)
    view = ShardDataset(coco_shards, image_size=96, targets=options)
    with dataio.DetectionLoader(coco_shards, targets=options, **{**EVAL, "batch_size": 12}) as loader:
        batch = next(iter(loader))
    for i, sample in enumerate(batch["sample_ids"].tolist()):
        height, width = batch["orig_size"][i].tolist()
        scale, offset = batch["scale"][i], batch["offset"][i]
        assert scale[0] == scale[1] == 96 / max(width, height)  # one factor: the ratio kept
        assert float(offset.max()) > 0 and float(offset.min()) == 0  # centred along the shorter side
        valid = batch["valid"][i]
        expected = whole[sample]["boxes"] * scale.repeat(2) + offset.repeat(2)
        assert torch.allclose(batch["boxes"][i][valid], expected, atol=1e-3)
        assert torch.equal(view[sample]["boxes"], batch["boxes"][i][valid])  # ShardDataset gives the same view
        x0, y0 = offset.round().int().tolist()
        x1, y1 = 96 - x0, 96 - y0
        outside = torch.ones(96, 96, dtype=torch.bool)
        outside[y0:y1, x0:x1] = False
        assert float(batch["image"][i][:, outside].abs().max()) == 0  # the padding is zeros, in pixels and masks
        first = int(batch["num_boxes"][:i].sum())
        assert int(batch["masks"][first:first + int(valid.sum())][:, outside].sum()) == 0


def test_the_flip_only_training_crop_mirrors_boxes_and_masks_and_cuts_nothing(coco_shards) -> None:
    train = dict(batch_size=12, image_size=96, train=True, seed=1, num_workers=1,
                 targets=dataio.DetectionConfig(crop="flip", masks=True))
    with dataio.DetectionLoader(coco_shards, hflip=0.0, **train) as loader:
        kept = next(iter(loader))
    with dataio.DetectionLoader(coco_shards, hflip=1.0, **train) as loader:
        mirrored = next(iter(loader))
    assert torch.equal(kept["sample_ids"], mirrored["sample_ids"])
    assert torch.equal(kept["num_boxes"], mirrored["num_boxes"])  # no crop: every box kept
    whole = ShardDataset(coco_shards)
    assert int(kept["num_boxes"].sum()) == sum(len(whole[int(s)]["boxes"]) for s in kept["sample_ids"])
    sizes = [whole[int(s)]["image"].shape[1:] for s in kept["sample_ids"]]
    places = letterbox_places(np.array([w for _, w in sizes]), np.array([h for h, _ in sizes]), 96)
    for i in range(12):
        valid = kept["valid"][i]
        left, right = float(places[i, 0]), float(places[i, 2])
        a, b = kept["boxes"][i][valid], mirrored["boxes"][i][valid]
        assert torch.allclose(b[:, 0], left + right - a[:, 2], atol=1e-3)  # x mirrored inside the placed image
        assert torch.allclose(b[:, 1::2], a[:, 1::2])
        first, count = int(kept["num_boxes"][:i].sum()), int(valid.sum())
        assert torch.equal(mirrored["masks"][first:first + count, :, int(left):int(right)],
                           kept["masks"][first:first + count, :, int(left):int(right)].flip(-1))


def test_the_torchvision_layout_gives_lists_with_background_zero(coco_shards) -> None:
    options = dataio.DetectionConfig(layout="torchvision", masks=True)
    with dataio.DetectionLoader(coco_shards, targets=options, **EVAL) as loader:
        images, targets = next(iter(loader))
    with dataio.DetectionLoader(coco_shards, targets=dataio.DetectionConfig(masks=True), **EVAL) as loader:
        batch = next(iter(loader))
    assert isinstance(images, list) and len(images) == len(targets) == 5
    mapped = to_original([b[v] for b, v in zip(batch["boxes"], batch["valid"], strict=True)], batch)
    assert all(image.shape == (3, 96, 96) and image.dtype == torch.float32 for image in images)
    for i, target in enumerate(targets):
        valid = batch["valid"][i]
        assert torch.equal(target["boxes"], batch["boxes"][i][valid]) and target["boxes"].dtype == torch.float32
        assert torch.equal(target["labels"], batch["labels"][i][valid] + 1) and target["labels"].dtype == torch.int64
        assert target["masks"].shape == (int(valid.sum()), 96, 96) and target["image_id"] == int(batch["image_id"][i])
        assert torch.equal(to_original(target["boxes"], target), mapped[i])  # one image's frame, as the batch's


def test_keep_ratio_views_with_a_square_window_decoder_are_refused_in_one_line(coco_shards) -> None:
    with pytest.raises(ConfigError, match="crop=flip.*crop_on_device"):
        dataio.DetectionLoader(coco_shards, batch_size=2, image_size=64, train=True, crop_on_device=True,
                               targets=dataio.DetectionConfig(crop="flip"))
    with pytest.raises(ConfigError, match="layout"):
        dataio.DetectionConfig(layout="tuple")
    with pytest.raises(ValueError, match="only evaluation batches"):
        to_original(torch.zeros(1, 1, 4), {"boxes": torch.zeros(1, 1, 4)})
