"""``map_back`` on values as users hold them (issue 43): integer, numpy, per image or per target list, and the
mistakes (NaN, a (N, 4) tensor for a batch, 5 columns, a count of images that is not the batch's) as one line."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import dataio
from dataio import DetectionConfig
from dataio.detection.map_back import keypoints_to_original, masks_to_original, to_original


@pytest.fixture(scope="module")
def letterboxed(coco_shards) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with dataio.DetectionLoader(coco_shards, train=False, image_size=(96, 160), batch_size=3, num_workers=1,
                                    targets=DetectionConfig(eval_crop="letterbox")) as loader:
            return next(iter(loader))


def test_int_numpy_and_per_target_boxes_map_back_as_float_boxes(letterboxed) -> None:
    batch = letterboxed
    want = to_original(batch["boxes"].round(), batch)
    assert want.dtype == torch.float32
    assert torch.allclose(to_original(batch["boxes"].round().long(), batch), want)
    assert torch.allclose(to_original(batch["boxes"].round().numpy(), batch), want)
    per_image = [b[v] for b, v in zip(batch["boxes"], batch["valid"], strict=True)]
    targets = [{name: batch[name][i] for name in ("orig_size", "scale", "offset")} for i in range(3)]
    for got, one, target, full in zip(to_original(per_image, targets), per_image, targets, to_original(
            per_image, batch), strict=True):  # a list of torchvision-layout targets, one per image
        assert torch.allclose(got, full) and torch.allclose(to_original(one.round().long(), target), got, atol=5)
    assert to_original(per_image[0].double(), targets[0]).dtype == torch.float64  # a float dtype is kept


@pytest.mark.parametrize(("boxes", "frame", "says"), [
    (lambda b: b["boxes"].clone().fill_(float("nan")), None, "NaN"),
    (lambda b: b["boxes"][:, 0], None, r"must be \(k, 4\)"),  # (N, 4) where (N, K, 4) is wanted
    (lambda b: torch.cat([b["boxes"], b["boxes"][..., :1]], -1), None, r"must be \(k, 4\)"),  # 5 columns
    (lambda b: [b["boxes"][0]] * 2, None, "2 images' boxes for a frame of 3"),
    (lambda b: "boxes", None, "tensor or array of numbers"),
    (lambda b: b["boxes"], lambda b: {"boxes": b["boxes"]}, "holds no orig_size"),
    (lambda b: b["boxes"], lambda b: [1, 2], "list of int"),
    (lambda b: b["boxes"][0], lambda b: {"orig_size": [4, 4], "scale": [0, 1], "offset": [0, 0]}, "has a zero"),
])
def test_boxes_map_back_refuses_what_it_cannot_take_in_one_line(letterboxed, boxes, frame, says) -> None:
    frame = letterboxed if frame is None else frame(letterboxed)
    with pytest.raises(ValueError, match=says) as error:
        to_original(boxes(letterboxed), frame)
    assert "\n" not in str(error.value)


def test_keypoints_and_masks_map_back_exactly_through_the_view() -> None:
    frame = {"orig_size": torch.tensor([30, 40]), "scale": torch.tensor([0.5, 0.5]),
             "offset": torch.tensor([0.0, 6.5])}  # a 40x30 image letterboxed into 20x28: 20x15 at y 6.5
    points = torch.tensor([[[10.0, 12.0, 2.0], [0.0, 0.0, 0.0], [4.0, 20.0, 1.0]]])
    back = keypoints_to_original(points, frame)
    assert torch.allclose(back, torch.tensor([[[20.0, 11.0, 2.0], [0.0, 0.0, 0.0], [8.0, 27.0, 1.0]]]))
    assert torch.allclose(keypoints_to_original(points[..., :2].long(), frame)[0, 0], torch.tensor([20.0, 11.0]))
    mask = torch.zeros(1, 28, 20, dtype=torch.uint8)
    mask[0, 7:12, 2:10] = 1  # original rows 1..10, columns 4..19 (twice the size, minus the offset)
    original = masks_to_original(mask, frame)
    want = torch.zeros(1, 30, 40, dtype=torch.uint8)
    want[0, 1:11, 4:20] = 1
    assert original.dtype == torch.uint8 and torch.equal(original, want)
    scores = masks_to_original(mask[:, None].float(), frame)  # Mask R-CNN's (k, 1, h, w) scores
    assert scores.shape == (1, 1, 30, 40) and torch.equal((scores[:, 0] > 0.5).to(torch.uint8), want)
    with pytest.raises(ValueError, match="keypoints must be"):
        keypoints_to_original(points[0], frame)
    with pytest.raises(ValueError, match="NaN"):
        keypoints_to_original(torch.full((1, 2, 3), float("nan")), frame)
    assert np.array_equal(masks_to_original(mask.numpy().astype(bool), frame).numpy(), want.numpy().astype(bool))
