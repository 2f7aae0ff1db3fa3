"""``DetectionLoader`` and ``ShardDataset`` over a folder with COCO keypoints: a ``keypoints`` (N, K, P, 3) field
lined up with the boxes (torchvision's keypoint R-CNN target per sample), moved by the exact affine map of the
evaluation view, following a training batch's crops, flips (left and right swapped) and RandAugment warps."""

from __future__ import annotations

import torch

import dataio
from dataio import ShardDataset
from dataio.augment import RandAugmentConfig
from dataio.detection.detection_config import DetectionConfig
from tests.keypoint_fixtures import NAMES

SIZE = 64


def test_the_evaluation_batch_carries_keypoints_by_the_exact_map_of_the_view(keypoint_shards) -> None:
    whole = ShardDataset(keypoint_shards)
    with dataio.DetectionLoader(keypoint_shards, batch_size=4, image_size=SIZE, train=False) as loader:
        batches = [dict(batch) for batch in loader]
    for batch in batches:
        n, k = batch["valid"].shape
        assert batch["keypoints"].shape == (n, k, len(NAMES), 3) and batch["keypoints"].dtype == torch.float32
        for i, sample in enumerate(batch["sample_ids"].tolist()):
            source = whole[sample]  # the whole image, its own pixels: the stored keypoints
            height, width = source["image"].shape[1:]
            expected = source["keypoints"].clone()
            labelled = expected[..., 2] > 0
            expected[..., 0] *= SIZE / width
            expected[..., 1] *= SIZE / height
            expected[~labelled] = 0
            got = batch["keypoints"][i][batch["valid"][i]]
            assert torch.allclose(got, expected, atol=1e-3)
            assert torch.equal(loader.dataset[sample]["keypoints"], got)  # ShardDataset's view is the same


def test_training_batches_keep_keypoints_in_their_boxes_and_swap_sides_on_a_flip(keypoint_shards) -> None:
    config = DetectionConfig(crop="random_resized")
    with dataio.DetectionLoader(keypoint_shards, batch_size=4, image_size=SIZE, train=True, seed=2, hflip=1.0,
                                targets=config, crop_scale=(0.5, 1.0)) as loader:
        batches = [dict(batch) for batch in loader]
    points = torch.cat([b["keypoints"][b["valid"]] for b in batches])
    boxes = torch.cat([b["boxes"][b["valid"]] for b in batches])
    seen = points[..., 2] > 0
    x, y = points[..., 0], points[..., 1]
    inside = (x >= boxes[:, None, 0] - 2) & (x <= boxes[:, None, 2] + 2) & (y >= boxes[:, None, 1] - 2) & \
        (y <= boxes[:, None, 3] + 2)
    assert bool(inside[seen].all()) and int(seen.sum()) > 20
    # every image flipped: the source's right eye (visibility 1) is the left eye now, its right hand (labelled)
    # the left hand, and each still lies left of its partner as the person faces the camera
    both = seen[:, 1] & seen[:, 2]
    assert bool((points[both, 1, 2] == 1).all() and (points[both, 2, 2] == 2).all()) and int(both.sum()) > 5
    assert bool((x[both, 1] < x[both, 2]).all())
    assert int((points[:, 3, 2] > 0).sum()) == 0 and int(seen[:, 4].sum()) > 5


def test_randaugment_warps_keep_keypoints_in_their_boxes(keypoint_shards) -> None:
    with dataio.DetectionLoader(keypoint_shards, batch_size=4, image_size=SIZE, train=True, seed=4, hflip=0.0,
                                randaugment=RandAugmentConfig(num_ops=2, magnitude=9,
                                                              ops=("Rotate", "ShearX", "TranslateY"))) as loader:
        batches = [dict(batch) for batch in loader]
    for batch in batches:
        points, boxes = batch["keypoints"][batch["valid"]], batch["boxes"][batch["valid"]]
        seen = points[..., 2] > 0
        x, y = points[..., 0], points[..., 1]
        inside = (x >= boxes[:, None, 0] - 2) & (x <= boxes[:, None, 2] + 2) & (y >= boxes[:, None, 1] - 2) & \
            (y <= boxes[:, None, 3] + 2)
        assert bool(inside[seen].all())
        assert bool(((x >= 0) & (x <= SIZE) & (y >= 0) & (y <= SIZE))[seen].all())


def test_a_folder_without_keypoints_gives_batches_without_them(coco_shards) -> None:
    with dataio.DetectionLoader(coco_shards, batch_size=4, image_size=SIZE, train=False) as loader:
        assert "keypoints" not in next(iter(loader))


def test_a_mixture_of_a_keypoints_folder_and_a_plain_one_reads_boxes_alone_saying_so(keypoint_shards, coco_shards,
                                                                                      caplog) -> None:
    """No points to line up in the plain folder's objects: the batches carry boxes alone, said in one line naming
    the source without keypoints (before: dropped without a word)."""
    with caplog.at_level("WARNING", logger="dataio"):
        loader = dataio.DetectionLoader({"people": keypoint_shards, "plain": coco_shards},
                                        weights={"people": 0.5, "plain": 0.5}, batch_size=4, image_size=SIZE,
                                        train=False)
    with loader:
        batch = next(iter(loader))
    assert "keypoints" not in batch and batch["boxes"].shape[-1] == 4
    lines = [r.getMessage() for r in caplog.records if "keypoints not read" in r.getMessage()]
    assert len(lines) == 1 and "'plain'" in lines[0] and "'people'" not in lines[0] and "\n" not in lines[0], lines
