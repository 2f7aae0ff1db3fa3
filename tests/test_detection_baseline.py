"""The detection benchmark's baseline (the standard recipe: a Dataset over the COCO files, PIL, a per-sample
box-aware crop, flip and resize) moves the boxes with the pixels, and ``dataio bench detection`` compares it with
the loader, run as a user runs it (issue 36). Only the CLI imports ``dataio.bench`` (tests/test_layout.py), so the
baseline's own check runs in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dataio.cli import main
from tests.test_cli_bench_demo import _for_users, _run

ROOT = Path(__file__).resolve().parents[1]
BOXES = """
import json, sys
from pathlib import Path
import numpy as np
from dataio.bench.detection_baseline import CocoBoxesDataset, SsdStyleTrainTransform, pad_boxes
from tests.augment.shape_photos import shape_pixels
dataset = CocoBoxesDataset(Path(sys.argv[1]), Path(sys.argv[2]), SsdStyleTrainTransform(96, seed=4))
checked, worst, cropped, flipped = 0, 0.0, 0, 0
for _ in range(3):
    for index in range(len(dataset)):
        image, boxes, labels = dataset[index]
        pixels = image.permute(1, 2, 0).numpy()
        for box, label in zip(boxes.astype(np.float64), labels):
            ys, xs = np.nonzero(shape_pixels(pixels, int(label)))
            bounds = np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
            worst = max(worst, float(np.maximum(box[:2] - bounds[:2], bounds[2:] - box[2:]).max()))
            checked += 1
batch = pad_boxes([dataset[i] for i in range(4)])
print(json.dumps({"checked": checked, "worst": worst, "shapes": {k: list(v.shape) for k, v in batch.items()},
                  "padding": bool((batch["labels"][~batch["valid"]] == -1).all())}))
"""


def test_the_standard_recipe_moves_each_box_with_its_shape(coco_folder) -> None:
    """Every box the baseline keeps bounds its shape (found again by colour) within 2 px, over three passes of
    random crops and flips: the ratio compares loaders that do the same work right."""
    done = subprocess.run([sys.executable, "-c", BOXES, str(coco_folder[0]), str(coco_folder[1])],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["checked"] > 60 and found["worst"] <= 2, found  # 40 shapes a pass, some cropped away
    assert found["shapes"]["image"] == [4, 3, 96, 96] and found["padding"]


def test_bench_detection_prints_the_ratio_and_writes_both_rows(coco_folder, coco_shards, tmp_path,
                                                               capsys) -> None:
    result = _run("bench", "detection", str(coco_folder[0]), str(coco_folder[1]), "--shards", str(coco_shards),
                  "--out", str(tmp_path), "--batch-size", "4", "--image-size", "64", "--workers", "1", "--epochs", "2",
                  "--warmup", "0")
    assert result.returncode == 0, result.stderr[-3000:]
    _for_users(result.stdout)
    report = json.loads((tmp_path / "detection.json").read_text())
    rows = {row["row"]: row for row in report["rows"]}
    assert rows.keys() == {"standard", "dataio"} and report["data"]["images"] == 12 and report["data"]["boxes"] == 40
    assert all(row["epochs_images"] == [12, 12] and row["img_s"] > 0 for row in rows.values())  # the same images
    assert report["ratio"] == rows["dataio"]["img_s"] / rows["standard"]["img_s"]
    assert f"dataio ran at {report['ratio']:.2f}x the standard detection recipe's images/s" in result.stdout
    assert report["machine"]["cores"] and len(report["load_average"]["before"]) == 3
    assert main(["bench", "detection", str(coco_folder[0]), str(coco_folder[1]), "--warmup", "-1"]) == 2
    assert "warmup >= 0" in capsys.readouterr().err
