"""dataio train --task segment (issue 36): COCO photos of real size packed by ``dataio convert coco``, a small FCN
trained on their masks to a mean IoU well above chance, log.csv, SIGTERM and an exact resume; the task's refusals."""

from __future__ import annotations

import csv
import json
import re
import signal
import sys
from pathlib import Path

import pytest
import torch

from dataio.cli import main
from dataio.formats.coco.coco_convert import ConvertCocoConfig, convert_coco
from dataio.formats.coco.synthetic_coco import SyntheticCocoConfig, write_coco_folder
from dataio.train import checkpoint_fit
from dataio.train.config import TrainConfig
from dataio.train.models import build_image_model, build_segment_model
from dataio.train.segment_task import IGNORE, _miou_and_loss, semantic_targets
from tests.train.test_progress import LINE
from tests.train.test_stop_signals import STOPPED, _losses, _saved_step, _start
from tests.train.test_trainer import cli

STEPS = 48  # 12 photos in batches of 2, 8 epochs


def _args(data: tuple[Path, Path]) -> list[str]:
    """64 px crops of the 640x480 photos with RandAugment's warps (the RNG a checkpoint must restore)."""
    return ["train", "--task", "segment", "--train", str(data[0]), "--val", str(data[1]), "--epochs", "8",
            "--image-size", "64", "--batch-size", "2", "--optimizer", "adamw", "--lr", "0.005", "--workers", "1",
            "--randaugment", "5"]


@pytest.fixture(scope="module")
def segment_data(coco_folder, tmp_path_factory) -> tuple[Path, Path]:
    """``coco_folder`` (12 photos, 10 with 4 shapes) packed by the CLI; 4 photos of other shapes, the val set."""
    root = tmp_path_factory.mktemp("segment")
    packed = cli("convert", "coco", str(coco_folder[0]), str(coco_folder[1]), str(root / "train"), "--workers", "1")
    assert packed.returncode == 0 and "packed 12 images with 40 boxes (40 masks)" in packed.stdout, packed.stderr
    images, annotations = write_coco_folder(root / "val-photos", SyntheticCocoConfig(images=4, seed=37))
    convert_coco(ConvertCocoConfig(images=images, annotations=annotations, out=root / "val", num_workers=1,
                                   progress=False))
    return root / "train", root / "val"


@pytest.fixture(scope="module")
def whole(segment_data, tmp_path_factory) -> Path:
    """The uninterrupted run (the stopped and resumed one must equal it)."""
    out = tmp_path_factory.mktemp("segment-run") / "run"
    done = cli(*_args(segment_data), "--out", str(out))
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    return out


def _chance(val_photos: Path) -> float:
    """The mean IoU of predicting the background everywhere (the most frequent class): its pixel share over the
    classes present, objects' categories and the background."""
    document = json.loads((val_photos / "instances.json").read_text())
    pixels = sum(image["width"] * image["height"] for image in document["images"])
    objects = sum(annotation["area"] for annotation in document["annotations"])
    present = len({annotation["category_id"] for annotation in document["annotations"]}) + 1
    return (pixels - objects) / pixels / present


def test_convert_then_train_segment_reaches_a_mean_iou_well_above_chance(segment_data, whole) -> None:
    rows = list(csv.DictReader((whole / "log.csv").open()))
    epochs = [row for row in rows if row["val_miou"]]
    assert [int(row["step"]) for row in epochs] == list(range(6, STEPS + 1, 6))
    miou = float(epochs[-1]["val_miou"])
    chance = _chance(segment_data[1].parent / "val-photos")
    assert 0.08 < chance < 0.15
    assert miou > 0.5 and miou > 3 * chance, (miou, chance)
    summary = json.loads((whole / "log.json").read_text())["summary"]
    assert summary["val_miou"] == pytest.approx(miou, rel=1e-5) and summary["val_loss"] < 1.0


def test_sigterm_saves_and_the_resumed_segment_run_equals_the_whole_one(segment_data, whole, tmp_path) -> None:
    out = tmp_path / "cut"
    process = _start([sys.executable, "-m", "dataio", *_args(segment_data), "--out", str(out)])
    first = process.stdout.readline()
    assert LINE.fullmatch(first.rstrip("\n")), first
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=300)
    stopped = re.fullmatch(STOPPED.format(what="stopped by SIGTERM"), err)
    assert process.returncode == 143 and stopped, (process.returncode, err[-3000:])
    step = int(stopped.group(1))
    assert _saved_step(out) == step < STEPS
    resumed = cli(*_args(segment_data), "--out", str(out), "--resume")
    assert resumed.returncode == 0 and resumed.stderr == "", resumed.stderr[-2000:]
    assert f"resumed from step {step}:" in resumed.stdout
    assert _losses(out) == _losses(whole)  # the masks' crops, flips and warps replayed exactly
    cut, uncut = (torch.load(folder / "checkpoint.pt", weights_only=True) for folder in (out, whole))
    assert cut["step"] == uncut["step"] == STEPS and cut["run"]["task"] == "segment"
    assert all(torch.equal(tensor, cut["model"][key]) for key, tensor in uncut["model"].items())
    logged = [[row["step"], row["val_miou"]] for row in csv.DictReader((out / "log.csv").open())]
    assert logged == [[row["step"], row["val_miou"]] for row in csv.DictReader((whole / "log.csv").open())]


def test_class_maps_from_instance_masks() -> None:
    """Label + 1 where an object is (the larger where two overlap), 0 elsewhere, ignored under a crowd region."""
    masks = torch.zeros((3, 4, 4), dtype=torch.uint8)
    masks[0, :2, :2] = 1  # sample 0: label 2 top left
    masks[1, 1:3, 1:3] = 1  # sample 0: label 0, overlapping it at (1, 1)
    masks[2, 3, :] = 1  # sample 1: a crowd region on the last row
    batch = {"image": torch.zeros((2, 3, 4, 4)), "num_boxes": torch.tensor([2, 1]), "masks": masks,
             "valid": torch.tensor([[True, True], [True, False]]), "labels": torch.tensor([[2, 0], [1, -1]]),
             "iscrowd": torch.tensor([[False, False], [True, False]])}
    maps = semantic_targets(batch)
    assert maps[0].tolist() == [[3, 3, 0, 0], [3, 3, 1, 0], [0, 1, 1, 0], [0, 0, 0, 0]]
    assert maps[1].tolist() == [[0] * 4] * 3 + [[IGNORE] * 4]


def test_mean_iou_counts_the_classes_present() -> None:
    """Three classes, the third never seen nor predicted: the mean of the other two IoUs."""
    confusion = [[6, 2, 0], [1, 3, 0], [0, 0, 0]]  # rows: targets, columns: predictions
    metrics = _miou_and_loss([float(v) for row in confusion for v in row] + [24.0, 12.0])
    assert metrics["miou"] == pytest.approx((6 / 9 + 3 / 6) / 2) and metrics["loss"] == 2.0


def test_segment_refusals_are_one_line(segment_data, whole, image_shards, capsys) -> None:
    """A COCO folder trained as classification was 'too many values to unpack' (its batches are dicts)."""
    train = str(segment_data[0])
    cases = [(["--train", train], f"--task: {train} holds boxes (COCO): --task segment trains on its masks"),
             (["--task", "segment", "--train", str(image_shards)], f"declares none (pack COCO instances"),
             (["--task", "segment", "--train", train, "--model", "resnet18"], "'resnet18' is no segmentation model"),
             (["--task", "segment", "--train", train, "--mixup", "0.2"], "has no rule for masks")]
    for args, reason in cases:
        assert main(["train", *args, "--out", str(whole.parent / "refused"), "--epochs", "1"]) == 2
        err = capsys.readouterr().err
        assert reason in err and err.count("\n") == 1, err
    state = torch.load(whole / "checkpoint.pt", weights_only=True)
    model = build_image_model("small_cnn", 6)
    assert checkpoint_fit.misfit(state, model, TrainConfig(train=train), "classify") == (
        "is for --task segment; this run is --task classify")
    state["run"].pop("task")  # a checkpoint written before --task segment
    assert checkpoint_fit.misfit(state, build_segment_model("small_cnn", 7), TrainConfig(train=train, task="segment"),
                                 "segment") == "is for a task other than segment; this run is --task segment"


def test_segment_over_objects_without_masks_is_refused_in_one_line(coco_folder, segment_data, tmp_path) -> None:
    """Box-only annotations merged in: their masks were all background, and --task segment trained and scored their
    pixels as background without a word. Refused for a train folder and a validation set alike."""
    document = json.loads(coco_folder[1].read_text())
    for annotation in document["annotations"][:3]:
        annotation.pop("segmentation")
    (tmp_path / "merged.json").write_text(json.dumps(document))
    packed = cli("convert", "coco", str(coco_folder[0]), str(tmp_path / "merged.json"), str(tmp_path / "train"),
                 "--workers", "1")
    assert packed.returncode == 0 and "40 boxes (37 masks)" in packed.stdout, packed.stderr
    for args in (["--train", str(tmp_path / "train")], ["--train", str(segment_data[0]), "--val",
                                                         str(tmp_path / "train")]):
        done = cli("train", "--task", "segment", *args, "--out", str(tmp_path / "out"), "--epochs", "1",
                   "--image-size", "32", "--batch-size", "2", "--workers", "1")
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
        assert lines[0].startswith("dataio train: error: --task segment trains and scores every object's pixels as its "
                                   f"class: {tmp_path / 'train'}: 3 of its 40 objects have no segmentation"), lines[0]
    assert not (tmp_path / "out" / "checkpoint.pt").exists()
