"""A new user's torchvision detection code on dataio (issue 43), run unmodified as client subprocesses.

Each test is what a user of torchvision's references/detection or of the detection docs does, following
docs/detection.md only; each fails on today's code.
"""

from __future__ import annotations

import textwrap

from tests.clients.conftest import client_env, run_client  # noqa: F401  (fixture)


def _run(script: str, args: list[str], client_env, tmp_path, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(script))
    return run_client([str(path), *args], client_env, tmp_path)


KEYPOINT_RCNN = '''
    """docs/detection.md's torchvision recipe (layout="torchvision") on a person_keypoints folder: Keypoint R-CNN."""
    import sys
    import torch
    import dataio
    from torchvision.models.detection import keypointrcnn_resnet50_fpn

    torch.manual_seed(0)
    train = dataio.DataLoader(sys.argv[1], batch_size=2, shuffle=True, image_size=96,
                              targets=dataio.DetectionConfig(crop="flip", layout="torchvision"))
    images, targets = next(iter(train))
    print("target keys", sorted(targets[0]))
    model = keypointrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=len(train.classes) + 1,
                                      num_keypoints=5, min_size=64, max_size=96)
    losses = model(images, targets)
    print("losses", sorted(losses))
'''


def test_torchvision_layout_carries_keypoints_for_keypoint_rcnn(keypoint_shards, client_env, tmp_path) -> None:
    """The user reads a person_keypoints folder with the torchvision layout, as docs/detection.md shows for Faster
    R-CNN, and gives it to Keypoint R-CNN. The dict batch has `keypoints`, but the torchvision layout's target dicts
    drop them (keys: boxes, image_id, iscrowd, labels, repeated), so keypoint R-CNN fails in its roi_heads.
    Expected: the targets carry `keypoints` (K, P, 3), as `keypoints[i][valid[i]]` of the dict batch."""
    done = _run(KEYPOINT_RCNN, [str(keypoint_shards)], client_env, tmp_path, "keypoint_rcnn")
    assert "target keys" in done.stdout, done.stderr[-3000:]
    assert "'keypoints'" in done.stdout.splitlines()[0], done.stdout
    assert done.returncode == 0, done.stderr[-3000:]
    assert "loss_keypoint" in done.stdout


SHARD_DATASET_LAYOUT = '''
    """torchvision references/detection's loop over a map-style data set: (image, target) items, tuple(zip(*b))."""
    import sys
    import torch
    import dataio

    dataset = dataio.ShardDataset(sys.argv[1], targets=dataio.DetectionConfig(layout="torchvision"))
    loader = torch.utils.data.DataLoader(dataset, batch_size=2, collate_fn=lambda batch: tuple(zip(*batch)))
    for images, targets in loader:
        print("image", tuple(images[0].shape), "target", sorted(targets[0]))
        break
'''


def test_shard_dataset_does_not_ignore_the_torchvision_layout(coco_shards, client_env, tmp_path) -> None:
    """ShardDataset takes `targets=`; the user asks it for the torchvision layout to feed references/detection's
    loop (`collate_fn=lambda b: tuple(zip(*b))`, `for images, targets in loader`). The layout is silently ignored:
    items stay dicts, the collate zips their key names and the loop dies with "too many values to unpack".
    Expected: `(image, target)` items as torchvision's CocoDetection wrapper gives them, or a one-line refusal
    naming `layout` at construction."""
    done = _run(SHARD_DATASET_LAYOUT, [str(coco_shards)], client_env, tmp_path, "shard_layout")
    log = done.stdout + done.stderr
    refused = done.returncode != 0 and "layout" in done.stderr.strip().splitlines()[-1]
    assert refused or (done.returncode == 0 and "'boxes'" in done.stdout), log[-3000:]


PRESETS_SSD = '''
    """torchvision references/detection/presets.py's "ssd" training preset (v2) on ShardDataset items."""
    import sys
    from collections import defaultdict
    import torch
    import dataio
    from torchvision import tv_tensors
    from torchvision.transforms import v2 as T

    fill = defaultdict(lambda: 0, {tv_tensors.Image: (123.0, 117.0, 104.0)})
    transform = T.Compose([T.RandomPhotometricDistort(p=1.0), T.RandomZoomOut(fill=fill, p=1.0), T.RandomIoUCrop(),
                           T.RandomHorizontalFlip(p=1.0), T.ToImage(), T.ToDtype(torch.float, scale=True),
                           T.ConvertBoundingBoxFormat(tv_tensors.BoundingBoxFormat.XYXY),
                           T.SanitizeBoundingBoxes(), T.ToPureTensor()])
    torch.manual_seed(0)
    dataset = dataio.ShardDataset(sys.argv[1], transform=transform)
    for i in range(len(dataset)):
        item = dataset[i]
        sizes = {key: len(item[key]) for key in ("boxes", "labels", "iscrowd")}
        print(i, sizes)
        assert len(set(sizes.values())) == 1, f"per-object fields out of step after SanitizeBoundingBoxes: {sizes}"
    print("aligned")
'''


def test_presets_ssd_keeps_per_object_fields_aligned(coco_shards, client_env, tmp_path) -> None:
    """The references' SSD preset (RandomIoUCrop, then SanitizeBoundingBoxes) drops boxes whose object left the crop.
    It drops their `labels` too, but the item's `iscrowd` is a plain tensor that SanitizeBoundingBoxes does not
    touch: item 1 comes out with 3 boxes, 3 labels and 4 crowd flags, so crowd flags no longer say which box is a
    crowd. Expected: every per-object field of an item follows the boxes (or iscrowd not given as a loose tensor)."""
    done = _run(PRESETS_SSD, [str(coco_shards)], client_env, tmp_path, "presets_ssd")
    assert done.returncode == 0 and "aligned" in done.stdout, (done.stdout + done.stderr)[-3000:]


V2_FLIP_KEYPOINTS = '''
    """A v2 horizontal flip of a ShardDataset item of a person_keypoints folder (docs: v2 transforms move targets)."""
    import sys
    import torch
    import dataio
    from torchvision.transforms import v2

    dataset = dataio.ShardDataset(sys.argv[1])
    item = dataset[0]
    width = item["image"].shape[-1]
    flipped = v2.RandomHorizontalFlip(p=1.0)(item)
    box_moved = torch.allclose(flipped["boxes"][0, 0], width - item["boxes"][0, 2])
    labelled = item["keypoints"][0, :, 2] > 0
    point_moved = torch.allclose(flipped["keypoints"][0, labelled, 0], width - item["keypoints"][0, labelled, 0])
    print(f"box moved {box_moved} keypoints moved {point_moved}")
'''


def test_v2_flip_moves_shard_dataset_keypoints_with_the_boxes(keypoint_shards, client_env, tmp_path) -> None:
    """A torchvision v2 flip of a keypoint item mirrors the image and the `BoundingBoxes`, but `keypoints` are a
    plain tensor and stay where they were: a silent mismatch (every other dataio map moves them, docs say).
    Expected: the keypoints move with the image and boxes (tv_tensors.KeyPoints exists in torchvision 0.28), or a
    line saying a v2 transform does not move them. (Left/right swapping is not asked here, only x -> W - x.)"""
    done = _run(V2_FLIP_KEYPOINTS, [str(keypoint_shards)], client_env, tmp_path, "v2_flip_kp")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "box moved True keypoints moved True" in done.stdout, done.stdout + done.stderr[-2000:]
