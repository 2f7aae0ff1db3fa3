"""torchvision's own v2 transforms on ``ShardDataset`` detection items: the boxes and masks move with the image
(issue 43, item 3: they were plain tensors, so a flip moved the image alone and RandomIoUCrop refused the sample)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.clients.conftest import run_client

SCRIPT = textwrap.dedent('''
    import json, sys
    import torch
    from torchvision import tv_tensors
    from torchvision.transforms import v2
    import dataio

    folder = sys.argv[1]
    plain = dataio.ShardDataset(folder, targets=dataio.DetectionConfig(masks=True))
    flipped = dataio.ShardDataset(folder, transform=v2.RandomHorizontalFlip(p=1.0),
                                  targets=dataio.DetectionConfig(masks=True))
    index = next(i for i in range(len(plain)) if len(plain[i]["boxes"]))
    before, after = plain[index], flipped[index]
    width = before["image"].shape[-1]
    expected = before["boxes"].clone()
    expected[:, 0], expected[:, 2] = width - before["boxes"][:, 2], width - before["boxes"][:, 0]
    torch.manual_seed(0)
    cropped = dataio.ShardDataset(folder, transform=v2.Compose([v2.RandomIoUCrop(), v2.Resize((64, 64)),
                                                               v2.SanitizeBoundingBoxes()]))
    sample = cropped[index]
    print(json.dumps({
        "types": [type(before["boxes"]).__name__, type(before["masks"]).__name__],
        "canvas": list(before["boxes"].canvas_size), "size": list(before["image"].shape[1:]),
        "boxes_flipped": bool(torch.allclose(after["boxes"], expected)),
        "image_flipped": bool(torch.equal(after["image"], before["image"].flip(-1))),
        "masks_flipped": bool(torch.equal(after["masks"], before["masks"].flip(-1))),
        "crop_size": list(sample["image"].shape[1:]),
        "crop_boxes_inside": bool((sample["boxes"][:, 2:] <= 64).all()),
        "crop_labels": len(sample["labels"]) == len(sample["boxes"]),
    }))
''')


def test_v2_transforms_move_the_boxes_and_masks_of_shard_dataset_items(coco_shards, client_env, tmp_path) -> None:
    script = tmp_path / "v2_items.py"
    script.write_text(SCRIPT)
    result = run_client([str(script), str(coco_shards)], client_env, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["types"] == ["BoundingBoxes", "Mask"] and found["canvas"] == found["size"]
    assert found["image_flipped"] and found["boxes_flipped"] and found["masks_flipped"]  # x1' = W - x2
    assert found["crop_size"] == [64, 64] and found["crop_boxes_inside"] and found["crop_labels"]
