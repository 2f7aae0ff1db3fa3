"""The trainer's tasks (``dataio.train.task``): each satisfies the protocol and declares its kinds and options; the
task is chosen by the data's declared kind, and a task refuses data it cannot read and options it does not honour,
in one line before any loader starts; the trainer and the tasks open no manifest."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from dataio.formats.coco.coco_convert import ConvertCocoConfig, convert_coco
from dataio.formats.errors import ConfigError
from dataio.formats.kinds import KINDS
from dataio.train.config import TASKS, TrainConfig
from dataio.train.task import COMMON_OPTIONS, Task, TrainLoader
from dataio.train.task_choice import USES, chosen_task, start_task, task_classes

ROOT = Path(__file__).resolve().parents[2]
CPU = torch.device("cpu")
SMALL = dict(image_size=32, batch_size=4, epochs=1, num_workers=1)


@pytest.fixture(scope="module")
def coco_masks(coco_folder, tmp_path_factory) -> Path:
    """``coco_folder`` packed with its masks (the detection kind, as --task segment reads it)."""
    out = tmp_path_factory.mktemp("coco_masks") / "out"
    convert_coco(ConvertCocoConfig(images=coco_folder[0], annotations=coco_folder[1], out=out, num_workers=1,
                                   progress=False))
    return out


def _manifest_only(folder: Path, out: Path, **changes: object) -> Path:
    """A folder holding ``folder``'s manifest alone, its keys changed (None removes one): the choice reads no more."""
    data = json.loads((folder / "manifest.json").read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    out.mkdir(parents=True)
    (out / "manifest.json").write_text(json.dumps(data))
    return out


# -- the protocol ----------------------------------------------------------------------------------------------------
def test_every_kind_names_a_task_class_that_declares_its_kinds_and_options():
    tasks = task_classes()
    assert set(tasks) == set(TASKS) - {"auto"}  # --task's choices are the registry's tasks
    for name, kind in KINDS.items():
        task = kind.part("task")
        assert task is None and name == "views" or name in task.kinds, name
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    assert COMMON_OPTIONS | set(USES) == fields and not COMMON_OPTIONS & set(USES)  # every field classified once
    for name, task in tasks.items():
        assert task.name == name and task.model in ("image", "text") and task.kinds
        assert task.options <= set(USES), name  # beyond the common ones, each a field whose use is named
        assert set(task.refused) <= set(USES) - task.options, name
        assert all(need and how for need, how in task.needs.items())
        missing = [member for member in ("name", "kinds", "needs", "not_auto", "model", "options", "refused", "unit",
                                         "val_metrics", "build_model", "steps_in_epoch", "lr_scale", "train_batches",
                                         "loss", "evaluate", "mixture_record", "close") if not hasattr(task, member)]
        assert not missing, (name, missing)
    assert all(any(option in task.options for task in tasks.values()) for option in USES)  # none honoured by none
    assert {name: sorted(task.options) for name, task in tasks.items()} == {
        "classify": ["channels_last", "cpu_budget", "cutmix", "dynamic_batch", "image_size", "label_smoothing",
                     "mixup", "num_workers", "progressive", "randaugment"],
        "clip": ["channels_last", "context_length", "cpu_budget", "image_size", "num_workers", "tokenizer"],
        "segment": ["channels_last", "cpu_budget", "dynamic_batch", "image_size", "num_workers", "progressive",
                    "randaugment"],
        "lm": ["block_size", "max_tokens", "pack"]}


def test_each_task_started_for_its_kind_satisfies_the_protocol_and_reads_with_the_kinds_face(
        image_shards, pair_tars, coco_masks, text_shards):
    runs = {"classify": TrainConfig(train=image_shards, val=image_shards, **SMALL),
            "clip": TrainConfig(train=pair_tars, val=pair_tars, **SMALL),
            "segment": TrainConfig(train=coco_masks, val=coco_masks, task="segment", **SMALL),
            "lm": TrainConfig(train=text_shards, val=text_shards, model="tiny_gpt", max_tokens=512, epochs=1)}
    kinds = {"classify": "classification", "clip": "pairs", "segment": "detection", "lm": "tokens"}
    for name, config in runs.items():
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)  # ImageLoader over pairs or boxes would warn
            task = start_task(config, CPU)
        try:
            assert isinstance(task, Task) and isinstance(task.train_loader, TrainLoader) and task.name == name, name
            assert type(task.train_loader) is KINDS[kinds[name]].part("face"), (name, type(task.train_loader))
            assert task.steps_in_epoch(0) == len(task.train_loader) > 0
            assert task.tally is None and task.mixture_record() is None and task.lr_scale(0) == 1.0
        finally:
            task.close()


# -- the choice by declared kind -------------------------------------------------------------------------------------
def test_auto_takes_the_task_of_the_declared_kind_also_of_folders_packed_before_kinds(
        image_shards, pair_tars, coco_masks, text_shards, tmp_path):
    assert chosen_task(TrainConfig(train=image_shards)) == "classify"
    assert chosen_task(TrainConfig(train=pair_tars)) == "clip"
    assert chosen_task(TrainConfig(train=text_shards, model="tiny_gpt")) == "lm"
    assert chosen_task(TrainConfig(train=coco_masks, task="segment")) == "segment"
    old = ROOT / "tests" / "fixtures" / "format_1_1"  # committed folders written before sample_kind
    assert "sample_kind" not in json.loads((old / "images" / "manifest.json").read_text())
    assert chosen_task(TrainConfig(train=old / "images")) == "classify"
    assert chosen_task(TrainConfig(train=old / "text", model="tiny_gpt", task="lm")) == "lm"
    older_pairs = _manifest_only(pair_tars, tmp_path / "pairs", sample_kind=None)
    assert chosen_task(TrainConfig(train=older_pairs)) == "clip"
    older_boxes = _manifest_only(coco_masks, tmp_path / "boxes", sample_kind=None)
    assert chosen_task(TrainConfig(train=older_boxes, task="segment")) == "segment"
    with pytest.raises(ConfigError, match="holds boxes .COCO.: --task segment trains on its masks"):
        chosen_task(TrainConfig(train=older_boxes))  # detection is asked for, not guessed


@pytest.mark.parametrize("case, words, parameter", [
    ("views", ["views holds images for multi-crop views, which dataio train has no task for", "ViewsLoader"], "task"),
    ("tokens-image-model", ["{0} small_cnn is an image model", "holds token documents", "--task lm"], "model"),
    ("lm-on-classes", ["{0} lm trains on token documents", "holds images with classes", "`dataio convert text`"],
     "task"),
    ("clip-mixture-of-classes", ["{0} clip (auto) trains on image-text pairs", "holds images with classes",
                                 "give --task classify"], "task"),
    ("segment-val-without-masks", ["validation set val declares no masks", "--task segment"], "val"),
    ("classify-val-of-pairs", ["validation set val holds image-text pairs", "--task classify validates on images"],
     "val"),
])
def test_data_a_task_cannot_read_is_refused_naming_the_folder(case, words, parameter, image_shards, pair_tars,
                                                              coco_masks, text_shards, tmp_path):
    views = _manifest_only(image_shards, tmp_path / "views", sample_kind="views")
    configs = {"views": dict(train=views),
               "tokens-image-model": dict(train=text_shards),
               "lm-on-classes": dict(train=image_shards, task="lm", model="tiny_gpt"),
               "clip-mixture-of-classes": dict(train={"a": pair_tars, "b": image_shards}, weights={"a": 1, "b": 1}),
               "segment-val-without-masks": dict(train=coco_masks, val=image_shards, task="segment"),
               "classify-val-of-pairs": dict(train=image_shards, val=pair_tars)}
    with pytest.raises(ConfigError) as caught:
        chosen_task(TrainConfig(**configs[case]))
    for word in words:
        assert word in caught.value.template, (word, caught.value.template)
    assert caught.value.parameters == (parameter,)


def test_a_text_model_takes_lm_and_the_run_checks_its_data_before_any_loader(image_shards):
    """``auto`` with a text model is lm whatever the data (the choice reads none, as before); the run refuses image
    data in the choice's words (TextLoader would raise a ShardError: not token shards)."""
    config = TrainConfig(train=image_shards, model="tiny_gpt")
    assert chosen_task(config) == "lm"
    with pytest.raises(ConfigError, match=r"lm \(auto\) trains on token documents; .* holds images with classes "
                                          r"\(pack token documents with `dataio convert text`\)"):
        start_task(config, CPU)


# -- the options each task honours -----------------------------------------------------------------------------------
OPTION_CASES = [  # (id, data, args, the one line's words)
    ("classify-pack", "shards", ["--pack"],
     ["--pack packs the documents into rows of --task lm; this run is classify"]),
    ("clip-randaugment", "pairs", ["--randaugment", "5"],
     ["--randaugment augments the images of --task classify or --task segment; this run is clip"]),
    # issue 42: --task clip given by name, the flags a user reported accepted and ignored
    ("clip-named-mixup", "pairs", ["--task", "clip", "--mixup", "0.2"],
     ["--mixup mixes the images and their labels of --task classify; this run is clip"]),
    ("clip-named-randaugment-9", "pairs", ["--task", "clip", "--randaugment", "9"],
     ["--randaugment augments the images of --task classify or --task segment; this run is clip"]),
    ("segment-label-smoothing", "coco", ["--task", "segment", "--label-smoothing", "0"],
     ["--label-smoothing smooths the class targets of --task classify; this run is segment"]),
    ("segment-cutmix", "coco", ["--task", "segment", "--cutmix", "1"],
     ["--cutmix (MixUp/CutMix) has no rule for masks"]),
    ("lm-mixup", "text", ["--model", "tiny_gpt", "--mixup", "0.2"],
     ["--mixup mixes the images and their labels of --task classify; this run is lm"]),
    # given on the command line at its default value: still a flag the user set for nothing (a new user's report)
    ("lm-image-size-default", "text", ["--model", "tiny_gpt", "--image-size", "224"],
     ["--image-size sizes the images of --task classify, --task clip or --task segment; this run is lm"]),
    ("lm-no-channels-last", "text", ["--model", "tiny_gpt", "--no-channels-last"],
     ["--no-channels-last lays out the images and the model of --task classify, --task clip or --task segment; "
      "this run is lm"]),
]


@pytest.mark.parametrize("data, args, words", [c[1:] for c in OPTION_CASES], ids=[c[0] for c in OPTION_CASES])
def test_an_option_the_task_does_not_honour_is_one_line_and_exit_2(data, args, words, image_shards, pair_tars,
                                                                   coco_masks, text_shards, tmp_path):
    folders = {"shards": image_shards, "pairs": pair_tars, "coco": coco_masks, "text": text_shards}
    env = {**os.environ, "DATAIO_NUM_WORKERS": "1"}
    done = subprocess.run([sys.executable, "-m", "dataio", "train", "--train", str(folders[data]), *args, "--out",
                           str(tmp_path / "out"), "--epochs", "1"], env=env, capture_output=True, text=True,
                          timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert not (tmp_path / "out" / "checkpoint.pt").exists()


def test_an_option_at_its_default_is_not_refused(pair_tars):
    """In Python the rule sees values (the command line tells it the flags given too): a default value set in a
    config (``max_tokens=16384`` to clip) changes nothing."""
    config = TrainConfig(train=pair_tars, label_smoothing=0.1, max_tokens=16384, channels_last=True)
    assert chosen_task(config) == "clip"


# -- no manifest opened outside the choice ---------------------------------------------------------------------------
READERS = {"open_dataset", "read_manifest", "parse_manifest"}


def test_the_trainer_the_tasks_and_the_pair_loaders_open_no_manifest():
    modules = ["dataio.train.trainer", "dataio.train.pair_loaders",
               *(task.__module__ for task in task_classes().values())]
    found = []
    for module in modules:
        path = ROOT / Path(*module.split(".")).with_suffix(".py")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            called = node.func if isinstance(node, ast.Call) else None
            name = getattr(called, "id", None) or getattr(called, "attr", None)
            imported = [alias.name for alias in node.names] if isinstance(node, ast.ImportFrom) else []
            if name in READERS or READERS & set(imported):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert len(modules) == 6 and not found, found
