"""Which task ``dataio train`` runs (``--task``): classify, lm or clip, given or told by the data and model.

``auto`` picks lm for a text model, clip when the train data are image-text pairs (the first source's
manifest declares a ``caption`` field), else classify. A task that cannot read the data is refused here
in one line naming the folder, before any loader starts: classification of pair folders would otherwise
fail deep in the first step (a pair batch is a dict, and the manifest lists no class).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from dataio.formats.dataset.manifest import open_dataset
from dataio.formats.pairs.pair_fields import holds_pairs
from dataio.formats.errors import ConfigError
from dataio.train.config import TrainConfig
from dataio.train.models import is_text_model
from dataio.train.set_options import train_options, val_options
from dataio.train.val_sets import val_sets

Task = Literal["classify", "lm", "clip"]


def _holds_pairs(folder: Path | str, options) -> bool:
    return holds_pairs(open_dataset(folder, options)[1].sample_fields())


def train_folders(config: TrainConfig) -> dict[str, Path | str]:
    """``{name: folder}`` of the run's train data (``train`` for one folder)."""
    return dict(config.train) if isinstance(config.train, dict) else {"train": config.train}


def holds_pair_data(config: TrainConfig) -> bool:
    """Whether the run's train data are image-text pairs (the first source's manifest says)."""
    options = train_options(config)
    name, folder = next(iter(train_folders(config).items()))
    return _holds_pairs(folder, options.get(name) if isinstance(options, dict) else options)


def chosen_task(config: TrainConfig) -> Task:
    """``config.task``, or by the model and data for ``auto``; refuses a task the data cannot feed."""
    if config.task == "lm" or config.task == "auto" and is_text_model(config.model):
        if config.task == "lm" and not is_text_model(config.model):
            raise ConfigError(f"{{0}} lm trains a text model, got --model {config.model}", "task")
        return "lm"
    if is_text_model(config.model):
        raise ConfigError(f"{{0}} {config.task} trains an image model (clip: the image tower), got --model "
                          f"{config.model}", "task")
    pairs = holds_pair_data(config)
    task: Task = ("clip" if pairs else "classify") if config.task == "auto" else config.task  # type: ignore[assignment]
    first = next(iter(train_folders(config).values()))
    if config.tokenizer is not None and task != "clip":
        raise ConfigError(f"{{0}} tokenises the captions of --task clip; this run is {task}", "tokenizer")
    if task == "classify" and pairs:
        raise ConfigError(f"{{0}} classify trains on images with classes; {first} holds image-text pairs (give "
                          "--task clip)", "task")
    if task == "clip":
        if not pairs:
            raise ConfigError(f"{{0}} clip trains on image-text pairs; {first} holds images with classes (index "
                              "img2dataset tars with `dataio index`, or convert with --captions)", "task")
        options = val_options(config)
        for name, folder in val_sets(config.val).items():
            if not _holds_pairs(folder, options[name]):
                raise ConfigError(f"{{0}} {folder}: validation set {name} holds images with classes; --task clip "
                                  "validates on image-text pairs", "val")
    return task
