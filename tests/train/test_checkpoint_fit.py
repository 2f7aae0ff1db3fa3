"""A sound checkpoint that does not fit the run is named as such, never "corrupted" (issue 33): another --model,
data of another number of classes, another --optimizer; the CLI as a user runs it, one line and exit 1."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from dataio.cli import main
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.images.synthetic import SyntheticImagesConfig, write_image_folder
from tests.train.test_trainer import cli

OPTIONS = ["--image-size", "32", "--batch-size", "4", "--epochs", "1", "--workers", "1"]
AFRESH = "; resume with the options and data that wrote it, or move it away to start afresh\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """Shards of 3 and of 4 classes, and a finished small_cnn (SGD) run on the 3 classes in ``run``."""
    root = tmp_path_factory.mktemp("fit")
    for classes in (3, 4):
        write_image_folder(root / f"src{classes}", SyntheticImagesConfig(num_classes=classes, images_per_class=4))
        convert_images(ConvertImagesConfig(src=root / f"src{classes}", out=root / f"classes{classes}",
                                           num_workers=1, progress=False))
    done = cli("train", "--train", str(root / "classes3"), "--out", str(root / "run"), *OPTIONS)
    assert done.returncode == 0, done.stderr[-2000:]
    return root


def _resume(runs: Path, out: Path, *args: str, classes: int = 3) -> str:
    """The one line of a --resume that must fail (exit 1, no traceback), without the advice that ends it."""
    result = cli("train", "--train", str(runs / f"classes{classes}"), "--out", str(out), "--resume", *OPTIONS, *args)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.endswith(AFRESH) and result.stderr.count("\n") == 1, result.stderr
    assert "corrupt" not in result.stderr
    return result.stderr[:-len(AFRESH)]


def test_another_model_is_named(runs):
    assert _resume(runs, runs / "run", "--model", "resnet18") == (
        f"dataio train: checkpoint {runs / 'run' / 'checkpoint.pt'} is for model small_cnn; this run builds resnet18")


def test_data_of_another_number_of_classes_names_the_shapes(runs):
    assert _resume(runs, runs / "run", classes=4) == (
        f"dataio train: checkpoint {runs / 'run' / 'checkpoint.pt'} is for model small_cnn with head.weight (3, 128), "
        "head.bias (3,); this run builds small_cnn with (4, 128), (4,)")


def test_another_optimizer_is_named(runs):
    assert _resume(runs, runs / "run", "--optimizer", "adamw") == (
        f"dataio train: checkpoint {runs / 'run' / 'checkpoint.pt'} is for optimizer sgd; this run uses adamw")


def test_a_checkpoint_written_before_it_named_its_run_is_told_by_its_parameters(runs, tmp_path, capsys):
    out = tmp_path / "older"
    out.mkdir()
    state = torch.load(runs / "run" / "checkpoint.pt", weights_only=True)
    del state["run"]
    torch.save(state, out / "checkpoint.pt")

    def resume(*args: str, classes: int = 3) -> str:  # in this process: the subprocess cases above are the CLI's
        assert main(["train", "--train", str(runs / f"classes{classes}"), "--out", str(out), "--resume", *OPTIONS,
                     *args]) == 1
        err = capsys.readouterr().err
        assert err.endswith(AFRESH) and err.count("\n") == 1 and "corrupt" not in err, err
        return err[:-len(AFRESH)]

    assert resume(classes=4) == (
        f"dataio train: checkpoint {out / 'checkpoint.pt'} is for a model with head.weight (3, 128), head.bias (3,); "
        "this run builds small_cnn with (4, 128), (4,)")
    shown = resume("--model", "resnet18")
    assert shown.startswith(f"dataio train: checkpoint {out / 'checkpoint.pt'} is for another model: ")
    assert "of its parameters are not in this run's resnet18 (features.3.weight" in shown
    assert resume("--optimizer", "adamw").endswith("is for optimizer sgd; this run uses adamw")


def test_a_damaged_checkpoint_is_still_called_corrupted(runs, tmp_path):
    out = tmp_path / "damaged"
    shutil.copytree(runs / "run", out)
    data = bytearray((out / "checkpoint.pt").read_bytes())
    data[len(data) // 2:] = bytes(len(data) - len(data) // 2)  # the second half zeroed: the zip's directory too
    (out / "checkpoint.pt").write_bytes(bytes(data))
    result = cli("train", "--train", str(runs / "classes3"), "--out", str(out), "--resume", *OPTIONS)
    assert result.returncode == 1 and "Traceback" not in result.stderr and result.stderr.count("\n") == 1
    assert "truncated or corrupted" in result.stderr and str(out / "checkpoint.pt") in result.stderr


def test_a_clip_checkpoint_resumed_as_classification_or_the_reverse_names_both_tasks(runs, pair_tars, tmp_path):
    """Before: 'is for another model: 56 of its parameters are not in this run's small_cnn (...)', the tasks unnamed
    (and a checkpoint recorded ``--task auto`` whatever auto chose)."""
    clip = tmp_path / "clip"
    done = cli("train", "--train", str(pair_tars), "--out", str(clip), "--context-length", "16", *OPTIONS)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _resume(runs, clip) == (f"dataio train: checkpoint {clip / 'checkpoint.pt'} is for --task clip; this run "
                                   "is --task classify")
    result = cli("train", "--train", str(pair_tars), "--out", str(runs / "run"), "--resume", "--context-length", "16",
                 *OPTIONS)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr == (f"dataio train: checkpoint {runs / 'run' / 'checkpoint.pt'} is for --task classify; this "
                             "run is --task clip" + AFRESH)
