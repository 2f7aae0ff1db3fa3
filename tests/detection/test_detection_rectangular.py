"""Rectangular outputs of the detection loader (issue 43): ``image_size=(H, W)`` on every view, the targets through
the same maps, and a one-line refusal where a kind or a path has square crops only."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import dataio
from dataio import ShardDataset
from dataio.augment import RandAugmentConfig, ResolutionSchedule
from dataio.augment.letterbox import letterbox_places
from dataio.detection.map_back import to_original
from dataio.formats.errors import ConfigError
from tests.detection.test_detection_for_torchvision import average_precision, coco_results
from tests.detection.test_detection_geometry import WARPS, check_batch, shape_kinds
from tests.keypoint_fixtures import NAMES

HEIGHT, WIDTH = 96, 160
EVAL = dict(batch_size=12, image_size=(HEIGHT, WIDTH), train=False, seed=0, num_workers=1)


def test_a_rectangular_letterbox_batch_keeps_the_ratio_and_maps_back_exactly(coco_shards) -> None:
    whole = ShardDataset(coco_shards)
    options = dataio.DetectionConfig(eval_crop="letterbox", masks=True)
    view = ShardDataset(coco_shards, image_size=[HEIGHT, WIDTH], targets=options)
    with dataio.DetectionLoader(coco_shards, targets=options, **EVAL) as loader:
        assert loader.image_size == (HEIGHT, WIDTH)
        batch = next(iter(loader))
    assert batch["image"].shape == (12, 3, HEIGHT, WIDTH) and batch["masks"].shape[1:] == (HEIGHT, WIDTH)
    back = to_original([b[v] for b, v in zip(batch["boxes"], batch["valid"], strict=True)], batch)
    for i, sample in enumerate(batch["sample_ids"].tolist()):
        height, width = batch["orig_size"][i].tolist()
        scale, offset = batch["scale"][i], batch["offset"][i]
        fit = min(WIDTH / width, HEIGHT / height)  # the factor that fits both sides: one for x and y
        assert abs(float(scale[0]) - fit) < 1 / width and abs(float(scale[1]) - fit) < 1 / height
        valid = batch["valid"][i]
        original = whole[sample]["boxes"]
        assert torch.allclose(batch["boxes"][i][valid], original * scale.repeat(2) + offset.repeat(2), atol=1e-3)
        assert torch.allclose(back[i], original, atol=1e-3)  # to_original undoes it exactly
        item = view[sample]
        assert item["image"].shape == (3, HEIGHT, WIDTH) and torch.equal(item["boxes"], batch["boxes"][i][valid])
        x0, y0, x1, y1 = letterbox_places(np.array([width]), np.array([height]), (HEIGHT, WIDTH))[0].tolist()
        assert (x0, y0) == tuple(offset.round().int().tolist()) and (x1 - x0 == WIDTH or y1 - y0 == HEIGHT)
        outside = torch.ones(HEIGHT, WIDTH, dtype=torch.bool)
        outside[y0:y1, x0:x1] = False
        assert float(batch["image"][i][:, outside].abs().max()) == 0  # zeros around, in pixels and masks
        first = int(batch["num_boxes"][:i].sum())
        assert int(batch["masks"][first:first + int(valid.sum())][:, outside].sum()) == 0


@pytest.mark.parametrize("view", ["whole", "letterbox"])
def test_boxes_mapped_back_from_a_rectangular_view_score_ap_one(coco_folder, coco_shards, view) -> None:
    with dataio.DetectionLoader(coco_shards, targets=dataio.DetectionConfig(eval_crop=view), **EVAL) as loader:
        assert next(iter(loader))["image"].shape[-2:] == (HEIGHT, WIDTH)
        assert average_precision(coco_folder[1], coco_results(loader, to_original)) == pytest.approx(1.0)


@pytest.mark.parametrize(("size", "view"), [((HEIGHT, WIDTH), "whole"), ((HEIGHT, WIDTH), "centre"),
                                            ((HEIGHT, WIDTH), "letterbox"), (HEIGHT, "letterbox")])
def test_rectangular_eval_views_keep_boxes_and_masks_on_their_shapes(coco_folder, coco_shards, size, view) -> None:
    """The shapes are found by colour where the boxes say (the square letterbox too: it decoded the centre crop
    into its place, its boxes mapped from the whole image)."""
    kinds = shape_kinds(coco_folder[1])
    with dataio.DetectionLoader(coco_shards, targets=dataio.DetectionConfig(eval_crop=view, masks=True),
                                **{**EVAL, "image_size": size}) as loader:
        checked = sum(check_batch(batch, kinds, f"eval {view}") for batch in loader)
    assert checked == 40 if view != "centre" else checked >= 20  # the whole views lose none of the 40 boxes


def test_the_centre_view_crops_the_outputs_ratio_without_stretching(coco_shards) -> None:
    options = dataio.DetectionConfig(eval_crop="centre")
    with dataio.DetectionLoader(coco_shards, targets=options, val_crop_ratio=1.0, **EVAL) as loader:
        batch = next(iter(loader))
    assert torch.allclose(batch["scale"][:, 0], batch["scale"][:, 1])  # one factor: the crop has H:W's ratio


@pytest.mark.parametrize("crop", ["bbox", "random_resized"])
def test_rectangular_training_crops_move_boxes_and_masks_with_randaugment(coco_folder, coco_shards, crop) -> None:
    kinds = shape_kinds(coco_folder[1])
    with dataio.DetectionLoader(coco_shards, batch_size=6, image_size=(HEIGHT, WIDTH), train=True, seed=3,
                                num_workers=1, randaugment=RandAugmentConfig(**WARPS),
                                targets=dataio.DetectionConfig(crop=crop, masks=True, min_visible=0.3)) as loader:
        batches = list(loader)
    assert all(batch["image"].shape[-2:] == (HEIGHT, WIDTH) for batch in batches)
    assert sum(check_batch(batch, kinds, f"train {crop}") for batch in batches) >= 6


def test_the_flip_only_crop_at_a_rectangular_size_mirrors_inside_the_placed_image(coco_folder, coco_shards) -> None:
    train = dict(batch_size=12, image_size=(HEIGHT, WIDTH), train=True, seed=1, num_workers=1,
                 targets=dataio.DetectionConfig(crop="flip", masks=True))
    with dataio.DetectionLoader(coco_shards, hflip=0.0, **train) as loader:
        kept = next(iter(loader))
    with dataio.DetectionLoader(coco_shards, hflip=1.0, **train) as loader:
        mirrored = next(iter(loader))
    assert kept["image"].shape == (12, 3, HEIGHT, WIDTH) and torch.equal(kept["sample_ids"], mirrored["sample_ids"])
    whole = ShardDataset(coco_shards)
    assert int(kept["num_boxes"].sum()) == sum(len(whole[int(s)]["boxes"]) for s in kept["sample_ids"])
    kinds = shape_kinds(coco_folder[1])
    assert check_batch(kept, kinds, "flip 0") == check_batch(mirrored, kinds, "flip 1") == 40
    sizes = [whole[int(s)]["image"].shape[1:] for s in kept["sample_ids"]]
    places = letterbox_places(np.array([w for _, w in sizes]), np.array([h for h, _ in sizes]), (HEIGHT, WIDTH))
    for i in range(12):
        valid = kept["valid"][i]
        left, right = float(places[i, 0]), float(places[i, 2])
        a, b = kept["boxes"][i][valid], mirrored["boxes"][i][valid]
        assert torch.allclose(b[:, 0], left + right - a[:, 2], atol=1e-3) and torch.allclose(b[:, 1::2], a[:, 1::2])
        first, count = int(kept["num_boxes"][:i].sum()), int(valid.sum())
        assert torch.equal(mirrored["masks"][first:first + count, :, int(left):int(right)],
                           kept["masks"][first:first + count, :, int(left):int(right)].flip(-1))


@pytest.mark.parametrize("view", ["whole", "letterbox"])
def test_keypoints_follow_a_rectangular_view(keypoint_shards, view) -> None:
    whole = ShardDataset(keypoint_shards)
    with dataio.DetectionLoader(keypoint_shards, targets=dataio.DetectionConfig(eval_crop=view),
                                **{**EVAL, "batch_size": 4}) as loader:
        batches = [dict(batch) for batch in loader]
        for batch in batches:
            assert batch["keypoints"].shape[2:] == (len(NAMES), 3)
            for i, sample in enumerate(batch["sample_ids"].tolist()):
                expected = whole[sample]["keypoints"].clone()
                labelled = expected[..., 2] > 0
                expected[..., :2] = expected[..., :2] * batch["scale"][i] + batch["offset"][i]
                expected[~labelled] = 0
                got = batch["keypoints"][i][batch["valid"][i]]
                assert torch.allclose(got, expected, atol=2.0) and torch.equal(got[..., 2], expected[..., 2])
                assert torch.equal(loader.dataset[sample]["keypoints"], got)  # ShardDataset's (H, W) view


def test_keypoints_stay_in_their_boxes_through_a_rectangular_training_crop(keypoint_shards) -> None:
    with dataio.DetectionLoader(keypoint_shards, batch_size=4, image_size=(HEIGHT, WIDTH), train=True, seed=2,
                                num_workers=1, hflip=0.5, randaugment=RandAugmentConfig(**WARPS),
                                targets=dataio.DetectionConfig(crop="random_resized"),
                                crop_scale=(0.5, 1.0)) as loader:
        batches = [dict(batch) for batch in loader]
    points = torch.cat([b["keypoints"][b["valid"]] for b in batches])
    boxes = torch.cat([b["boxes"][b["valid"]] for b in batches])
    seen = points[..., 2] > 0
    x, y = points[..., 0], points[..., 1]
    inside = ((x >= boxes[:, None, 0] - 2) & (x <= boxes[:, None, 2] + 2) & (y >= boxes[:, None, 1] - 2)
              & (y <= boxes[:, None, 3] + 2))
    assert bool(inside[seen].all()) and int(seen.sum()) > 20
    assert bool(((x <= WIDTH) & (y <= HEIGHT))[seen].all()) and float(x[seen].max()) > HEIGHT  # wider than high


def test_the_drop_in_over_a_box_folder_takes_a_rectangular_size(coco_shards) -> None:
    with dataio.DataLoader(coco_shards, batch_size=4, image_size=(HEIGHT, WIDTH)) as loader:
        assert next(iter(loader))["image"].shape == (4, 3, HEIGHT, WIDTH)


def one_line(build, *args, **options) -> str:
    with pytest.raises(ConfigError) as info:
        build(*args, **options)
    message = str(info.value)
    assert message.startswith("image_size") and "\n" not in message
    return message


def test_square_only_kinds_and_paths_refuse_a_rectangular_size_in_one_line(coco_shards, real_photo_shards) -> None:
    for build in (dataio.ImageLoader, dataio.DataLoader, ShardDataset):
        message = one_line(build, real_photo_shards, image_size=(64, 96))
        assert "is for box folders" in message and "images with classes" in message and "pass one int" in message
    assert "crop_on_device" in one_line(dataio.DetectionLoader, coco_shards, image_size=(64, 96),
                                        crop_on_device=True)
    assert "decoder" in one_line(dataio.ImageLoaderConfig, image_size=(64, 96), decoder="dali")
    assert "schedule" in one_line(dataio.ImageLoaderConfig, image_size=(64, 96),
                                  schedule=ResolutionSchedule(epochs=2, start_size=64, end_size=96))
    assert dataio.ImageLoaderConfig(image_size=(64, 64)).image_size == 64  # (S, S) is S
    for bad in ((64, 96, 3), (64.0, 96), "64"):
        assert "(height, width) pair" in one_line(dataio.ImageLoaderConfig, image_size=bad)
