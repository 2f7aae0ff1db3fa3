"""torchvision's own keypoint R-CNN trains on a DetectionLoader batch of a person_keypoints folder as it comes:
``keypoints[i][valid[i]]`` is the (K_i, P, 3) target its ``roi_heads`` take (one step, losses finite, the keypoint
loss there), and the loader's flip of a keypoint is torchvision v2's ``horizontal_flip_keypoints`` within 2 px."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clients.conftest import run_client
from tests.keypoint_fixtures import NAMES

SCRIPT = """
import json, sys
import numpy as np, torch
import dataio
from torchvision.models.detection import KeypointRCNN
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.keypoint_rcnn import KeypointRCNNHeads, KeypointRCNNPredictor
from torchvision.ops import MultiScaleRoIAlign
from torchvision.transforms.v2 import functional as F
from dataio.augment.keypoint_targets import map_sample_keypoints
from dataio.augment.target_maps import crop_resize_maps
from dataio.formats.coco.coco_keypoints import flip_indices

folder, names = sys.argv[1], json.loads(sys.argv[2])
torch.manual_seed(0)
with dataio.DetectionLoader(folder, batch_size=2, image_size=64, train=True, seed=1, num_workers=1) as loader:
    batch = next(iter(loader))
images = [image.float() / 255 for image in batch["image"]]  # 0-1 floats, as its transform takes
targets = [{"boxes": b[v], "labels": l[v] + 1, "keypoints": k[v]}
           for b, l, k, v in zip(batch["boxes"], batch["labels"], batch["keypoints"], batch["valid"], strict=True)]
backbone = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, stride=4, padding=1), torch.nn.ReLU())
backbone.out_channels = 16  # torchvision's own KeypointRCNN (roi_heads, losses), on a tiny backbone: fast on a CPU
model = KeypointRCNN(backbone, num_classes=7, min_size=64, max_size=64,
                     rpn_anchor_generator=AnchorGenerator(sizes=((8, 16, 32),), aspect_ratios=((1.0,),)),
                     box_roi_pool=MultiScaleRoIAlign(["0"], 7, 2), keypoint_roi_pool=MultiScaleRoIAlign(["0"], 14, 2),
                     keypoint_head=KeypointRCNNHeads(16, (32,)), keypoint_predictor=KeypointRCNNPredictor(32, len(names)),
                     box_batch_size_per_image=32, rpn_batch_size_per_image=32)
model.train()
losses = model(images, targets)
item = dataio.ShardDataset(folder)[0]
height, width = item["image"].shape[1:]
points = item["keypoints"]
ours = map_sample_keypoints(points.numpy(), np.zeros(len(points), np.int64),
                            crop_resize_maps(np.array([[0.0, 0.0, width, height]]), np.array([True]), width, height),
                            width, height, flip_indices(names))
theirs = F.horizontal_flip_keypoints(points[..., :2], canvas_size=(height, width))[:, flip_indices(names)]
seen = ours[..., 2] > 0
print(json.dumps({"losses": {k: float(v) for k, v in losses.items()},
                  "flip_gap": float(np.abs(ours[..., :2][seen] - theirs.numpy()[seen]).max()),
                  "shape": list(batch["keypoints"].shape)}))
"""


def test_torchvisions_keypoint_rcnn_trains_on_the_batch_as_it_comes(client_env, keypoint_shards, tmp_path) -> None:
    script = tmp_path / "keypoint_rcnn_step.py"
    script.write_text(SCRIPT)
    done = run_client([str(script), str(keypoint_shards), json.dumps(NAMES)], client_env, Path(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["shape"][0] == 2 and result["shape"][2:] == [len(NAMES), 3]
    assert all(value == value and value < 1e4 for value in result["losses"].values())  # finite
    assert result["losses"]["loss_keypoint"] > 0
    assert result["flip_gap"] <= 2.0  # torchvision's keypoints are pixel indices (W - 1 - x), ours continuous
