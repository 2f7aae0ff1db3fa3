"""Named validation sets of ``dataio train`` (``--val NAME=PATH``): each evaluated and logged apart, and all
together under the plain names."""

from __future__ import annotations

import csv
import json
import math

import pytest

from dataio.train.config import TrainConfig
from dataio.train.image_task import _accuracy_and_loss
from dataio.train.text_task import _loss_and_perplexity
from dataio.train.val_sets import val_columns, val_metrics, val_sets
from tests.train.test_trainer import cli


def test_metrics_of_each_set_and_of_all_together():
    totals = {"web": [30.0, 40.0, 20.0], "code": [5.0, 10.0, 15.0]}  # correct, count, loss sum
    named = val_metrics(totals, _accuracy_and_loss, named=True)
    assert named["val_acc/web"] == 0.75 and named["val_loss/web"] == 0.5
    assert named["val_acc/code"] == 0.5 and named["val_loss/code"] == 1.5
    assert named["val_acc"] == 35 / 50 and named["val_loss"] == 35 / 50  # each sample once: count-weighted
    assert val_metrics({"val": totals["web"]}, _accuracy_and_loss, named=False) == {"val_acc": 0.75, "val_loss": 0.5}
    text = val_metrics({"a": [20.0, 10.0], "b": [10.0, 30.0]}, _loss_and_perplexity, named=True)
    assert text["val_loss"] == 30 / 40 and text["val_loss/a"] == 2.0 and text["val_ppl/b"] == math.exp(1 / 3)


def test_sets_and_columns_of_the_config(tmp_path):
    assert val_sets(None) == {} and val_sets(tmp_path) == {"val": tmp_path}
    config = TrainConfig(train=tmp_path, val={"web": str(tmp_path), "code": "s3://bucket/code"})
    assert config.val == {"web": tmp_path, "code": "s3://bucket/code"}  # URLs stay strings
    assert val_columns(config.val, ("acc", "loss")) == ("val_acc/web", "val_acc/code", "val_loss/web",
                                                         "val_loss/code")
    assert val_columns(tmp_path, ("acc", "loss")) == ()
    for val, words in (({}, "val: a dict needs at least one validation set"),
                       ({"we b": tmp_path}, "val: validation set name 'we b' must be")):
        with pytest.raises(ValueError, match=words):
            TrainConfig(train=tmp_path, val=val)


@pytest.mark.parametrize("args, line", [
    (["--val", "a=X", "--val", "Y"], "--val Y: give every validation set as NAME=PATH, or one PATH alone"),
    (["--val", "X", "--val", "Y"], "--val is given 2 times: named validation sets are NAME=PATH"),
    (["--val", "a=X", "--val", "a=Y"], "--val: set a is given twice"),
    (["--val", "a="], "--val a=: the path is missing"),
])
def test_bad_val_flags_are_one_line(tmp_path, args, line):
    done = cli("train", "--train", str(tmp_path), "--out", str(tmp_path / "run"), *args)
    assert done.returncode == 2 and done.stderr == f"dataio train: error: {line}\n"


def test_named_sets_are_logged_apart_and_together(real_photo_shards, tmp_path):
    """The same folder under two names: each set's metrics equal the plain run's, and so does their total."""
    common = ["train", "--train", str(real_photo_shards), "--image-size", "64", "--batch-size", "4", "--epochs",
              "2", "--workers", "1", "--progress-every", "0"]
    named = cli(*common, "--out", str(tmp_path / "named"), "--val", f"a={real_photo_shards}",
                "--val", f"b={real_photo_shards}")
    assert named.returncode == 0 and named.stderr == "", named.stderr[-2000:]
    plain = cli(*common, "--out", str(tmp_path / "plain"), "--val", str(real_photo_shards))
    assert plain.returncode == 0 and plain.stderr == "", plain.stderr[-2000:]
    with open(tmp_path / "named" / "log.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    epochs = [row for row in rows if row["val_acc"]]
    assert len(epochs) == 2 and list(rows[0])[-4:] == ["val_acc/a", "val_acc/b", "val_loss/a", "val_loss/b"]
    assert all(row["val_acc/a"] == "" for row in rows if not row["val_acc"])  # step rows leave them blank
    with open(tmp_path / "plain" / "log.csv", newline="") as file:
        plain_epochs = [row for row in csv.DictReader(file) if row["val_acc"]]
    assert "val_acc/a" not in plain_epochs[0]
    for row, alone in zip(epochs, plain_epochs, strict=True):
        for metric in ("acc", "loss"):
            value = float(alone[f"val_{metric}"])
            assert float(row[f"val_{metric}/a"]) == float(row[f"val_{metric}/b"]) == float(row[f"val_{metric}"])
            assert math.isclose(float(row[f"val_{metric}"]), value, rel_tol=1e-5, abs_tol=1e-6)
    summary = json.loads((tmp_path / "named" / "log.json").read_text())["summary"]
    assert {"val_acc", "val_acc/a", "val_loss/b"} <= set(summary)
    assert "val_acc/a=" in named.stdout  # the epoch lines show each set


def test_val_labels_are_mapped_to_the_train_classes_by_name(real_photos, real_photo_shards, tmp_path):
    """A val folder holding some of the train classes (here the second alone, numbered 0 in it) is scored
    against the model's class of that name; one with a class the model lacks is refused before training."""
    import shutil

    import torch

    from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
    from dataio.train.image_task import ImageTask

    classes = sorted(p.name for p in real_photos.iterdir() if p.is_dir())
    shutil.copytree(real_photos / classes[1], tmp_path / "src" / classes[1])
    convert_images(ConvertImagesConfig(src=tmp_path / "src", out=tmp_path / "val", num_workers=1, progress=False))
    config = TrainConfig(train=real_photo_shards, val={"second": tmp_path / "val", "all": real_photo_shards},
                         image_size=64, batch_size=4, num_workers=1)
    task = ImageTask(config, torch.device("cpu"))
    try:
        assert task.val_labels["second"].tolist() == [1] and task.val_labels["all"] is None
    finally:
        task.close()
    shutil.copytree(real_photos / classes[0], tmp_path / "other" / "unknown_class")
    convert_images(ConvertImagesConfig(src=tmp_path / "other", out=tmp_path / "bad", num_workers=1, progress=False))
    done = cli("train", "--train", str(real_photo_shards), "--val", str(tmp_path / "bad"), "--image-size", "64",
               "--out", str(tmp_path / "run"))
    assert done.returncode != 0 and done.stderr == ("dataio train: error: val: classes ['unknown_class'] are in no "
                                                    "train folder (2 classes): the model cannot predict them\n")
    assert not (tmp_path / "run" / "log.csv").exists()
