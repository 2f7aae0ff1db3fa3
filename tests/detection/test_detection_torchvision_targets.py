"""``layout="torchvision"`` as torchvision's clients take it (issue 43): the loader's targets carry keypoint R-CNN's
keypoints in training and evaluation, and ``ShardDataset`` gives ``(image, target)`` items."""

from __future__ import annotations

import torch

import dataio
from dataio import DetectionConfig, ShardDataset
from tests.keypoint_fixtures import NAMES


def test_the_torchvision_layout_carries_keypoints_in_train_and_eval(keypoint_shards) -> None:
    for train, crop in ((True, "flip"), (False, "letterbox")):
        options = dict(batch_size=4, image_size=64, train=train, seed=0, num_workers=1)
        targets = DetectionConfig(crop=crop) if train else DetectionConfig(eval_crop=crop)
        with dataio.DetectionLoader(keypoint_shards, targets=targets, **options) as loader:
            batch = next(iter(loader))
        with dataio.DetectionLoader(keypoint_shards, targets=DetectionConfig(
                **{**targets.__dict__, "layout": "torchvision"}), **options) as loader:
            _, listed = next(iter(loader))
        for i, target in enumerate(listed):
            valid = batch["valid"][i]
            assert target["keypoints"].shape == (int(valid.sum()), len(NAMES), 3)
            assert torch.equal(target["keypoints"], batch["keypoints"][i][valid])


def test_the_torchvision_layout_gives_shard_dataset_pairs(coco_shards) -> None:
    whole = ShardDataset(coco_shards)
    pairs = ShardDataset(coco_shards, targets=DetectionConfig(layout="torchvision"))
    seen = []
    flipped = ShardDataset(coco_shards, targets=DetectionConfig(layout="torchvision"),
                           transform=lambda image, target: seen.append(sorted(target)) or (image.flip(-1), target))
    for index in (0, 5):
        item = whole[index]
        image, target = pairs[index]
        assert torch.equal(image, item["image"]) and "image" not in target
        assert torch.equal(target["labels"], item["labels"] + 1)  # torchvision's background is 0, as the loader's
        assert torch.equal(target["boxes"], item["boxes"]) and target["image_id"] == item["image_id"]
        assert torch.equal(flipped[index][0], item["image"].flip(-1))  # transform(image, target), as `transforms`
    assert seen[0] == ["boxes", "image_id", "iscrowd", "labels"]
