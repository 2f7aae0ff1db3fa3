"""Which task ``dataio train`` runs (``--task``), chosen by the registry of kinds: the one module of the trainer
that opens manifests.

``auto`` takes the task of the train data's declared kind (``formats.kinds.kind_of(manifest).part("task")``; an
older folder's kind is inferred once, ``Manifest.declared_kind``), or ``lm`` for a text model, as before (the model
names the task; the data are checked when the run starts, ``start_task``). A given task must train on each data
set's kind, the train sources' and the validation sets'. Each task class declares what the choice checks
(``dataio.train.task.Task``): its kinds, the fields it needs beyond them, its model, the options it honours. What
it cannot do is refused here in one line naming the folder or the option, before any loader starts: classification
of pair folders would otherwise fail deep in the first step (a pair batch is a dict, and the manifest lists no
class), and a flag a task ignores would be accepted and do nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import torch

from dataio.formats.dataset.manifest import Manifest, open_dataset
from dataio.formats.errors import ConfigError
from dataio.formats.kinds import KINDS, Kind, kind_of
from dataio.train.config import TrainConfig
from dataio.train.models import is_text_model
from dataio.train.set_options import train_options, val_options
from dataio.train.task import COMMON_OPTIONS, Task
from dataio.train.val_sets import val_sets

DEFAULTS = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
# What each option a task may honour does, to say which tasks it is for: "{flag} <does> of --task clip; this run is
# classify". Every TrainConfig field is common (COMMON_OPTIONS) or here (tests/train/test_task_protocol.py).
USES = {
    "image_size": "sizes the images", "num_workers": "sets the decode threads",
    "cpu_budget": "sets the cores of the decode threads", "channels_last": "lays out the images and the model",
    "label_smoothing": "smooths the class targets", "randaugment": "augments the images",
    "mixup": "mixes the images and their labels", "cutmix": "cuts and mixes the images and their labels",
    "progressive": "ramps the image size", "dynamic_batch": "grows the batch as the image size falls",
    "max_tokens": "sets the tokens of a batch", "block_size": "sets the tokens of a packed row",
    "pack": "packs the documents into rows", "context_length": "cuts the captions' tokens",
    "tokenizer": "tokenises the captions",
}
FLAG_VALUES = {"channels_last": "channels_last=False"}  # a flag that sets a value (cli/flags.py names it)


@dataclass(frozen=True)
class DataSet:
    """One data set of the run: a train source (``train`` for one folder) or a validation set, and its manifest."""

    name: str
    folder: Path | str
    manifest: Manifest

    @property
    def kind(self) -> Kind:
        return kind_of(self.manifest)


class RunData:
    """The run's data sets as their manifests declare them, each manifest read once, when first asked for."""

    def __init__(self, config: TrainConfig) -> None:
        self.config = config

    @cached_property
    def train(self) -> tuple[DataSet, ...]:
        options = train_options(self.config)
        return tuple(DataSet(name, folder, open_dataset(folder, options.get(name) if isinstance(options, dict)
                                                        else options)[1])
                     for name, folder in train_folders(self.config).items())

    @cached_property
    def val(self) -> tuple[DataSet, ...]:
        options = val_options(self.config)
        return tuple(DataSet(name, folder, open_dataset(folder, options[name])[1])
                     for name, folder in val_sets(self.config.val).items())

    @property
    def samples(self) -> int:
        """The train sources' samples together (a mixture's schedule is placed in them before its loader starts)."""
        return sum(one.manifest.num_samples for one in self.train)

    @property
    def classes(self) -> tuple[str, ...]:
        """The train sources' class names, each once (a mixture's combined classes, as its loader maps them)."""
        return tuple(dict.fromkeys(name for one in self.train for name in one.manifest.classes))


def train_folders(config: TrainConfig) -> dict[str, Path | str]:
    """``{name: folder}`` of the run's train data (``train`` for one folder)."""
    return dict(config.train) if isinstance(config.train, Mapping) else {"train": config.train}


def task_classes() -> dict[str, type[Task]]:
    """``{--task name: class}`` of every kind's task (``formats.kinds``), in the table's order."""
    found = (kind.part("task") for kind in KINDS.values())
    return {task.name: task for task in found if task is not None}


def chosen_task(config: TrainConfig, data: RunData | None = None) -> str:
    """The run's task's name: ``config.task``, or by the data and model for ``auto``; refuses in one line a task
    the data cannot feed, the model it does not train and an option it does not honour."""
    return _choice(config, data or RunData(config))[0].name


def start_task(config: TrainConfig, device: torch.device) -> Task:
    """The run's task, checked (``chosen_task``) and made, its loaders started."""
    data = RunData(config)
    task, by_model = _choice(config, data)
    if by_model:  # auto took lm for a text model without reading the data: they are checked before TextLoader opens
        _refuse_unfed(task, data, config)
    make: Callable[..., Task] = task  # every task class is made so (dataio.train.task)
    return make(config, device, data=data)


def _choice(config: TrainConfig, data: RunData) -> tuple[type[Task], bool]:
    """The task class, and whether the text-model rule chose it (``auto``, reading no data); every refusal made
    that needs no loader, the data's for the tasks chosen by name or kind."""
    text = is_text_model(config.model)
    tasks = task_classes()
    if config.task == "auto" and text:  # the task that trains a text model (lm)
        task, by_model = next(one for one in tasks.values() if one.model == "text"), True
    elif config.task == "auto":
        first = data.train[0]
        task, by_model = _task_of(first), False
        if task.model == "text":
            raise ConfigError(f"{{0}} {config.model} is an image model; {first.folder} holds {first.kind.what}, which "
                              f"--task {task.name} trains a text model on", "model")
    else:
        task, by_model = tasks[config.task], False
    if (task.model == "text") != text:
        if text:
            raise ConfigError(f"{{0}} {task.name} trains an image model (clip: the image tower), got --model "
                              f"{config.model}", "task")
        raise ConfigError(f"{{0}} {task.name} trains a text model, got --model {config.model}", "task")
    _refuse_unhonoured(task, config, tasks)
    if not by_model:
        _refuse_unfed(task, data, config)
    return task, by_model


def _task_of(data: DataSet) -> type[Task]:
    """The task ``auto`` picks for the data's declared kind; refused for a kind whose task must be asked for."""
    kind = data.kind
    task = kind.part("task")
    if task is None:
        face = kind.face.rpartition(":")[2]  # named, not imported: the room may need what this machine lacks
        raise ConfigError(f"{{0}}: {data.folder} holds {kind.what}, which dataio train has no task for (read it "
                          f"with dataio.{face} in your own loop)", "task")
    if task.not_auto:
        raise ConfigError(f"{{0}}: {data.folder} {task.not_auto}", "task")
    return task


def _refuse_unhonoured(task: type[Task], config: TrainConfig, tasks: dict[str, type[Task]]) -> None:
    """An option ``task`` does not honour, set (given on the command line, or to another value than its default):
    one line naming it and the tasks that honour it (or the task's own reason)."""
    for name in DEFAULTS:
        if name in COMMON_OPTIONS or name in task.options:
            continue
        if name not in config.given and getattr(config, name) == DEFAULTS[name]:
            continue
        flag = FLAG_VALUES.get(name, name)
        if name in task.refused:
            raise ConfigError(f"{{0}} {task.refused[name]}", flag)
        honouring = [f"--task {other}" for other, cls in tasks.items() if name in cls.options]
        which = ", ".join(honouring[:-1]) + " or " + honouring[-1] if len(honouring) > 1 else honouring[0]
        raise ConfigError(f"{{0}} {USES[name]} of {which}; this run is {task.name}", flag)


def _refuse_unfed(task: type[Task], data: RunData, config: TrainConfig) -> None:
    """Each train source and validation set must declare a kind ``task`` trains on, and the fields it needs."""
    wants = " or ".join(KINDS[kind].what for kind in task.kinds)
    named = f"{task.name} (auto)" if config.task == "auto" else task.name
    for one in data.train:
        missing = _missing(task, one)
        if missing:
            raise ConfigError(f"{{0}} {named} trains on {missing}, and {one.folder} declares none "
                              f"({task.needs[missing]})", "task")
        held = one.kind
        if held.name not in task.kinds:
            other = held.part("task")
            fits = other is not None and other.name != task.name and other.model == task.model  # its --model too
            give = f"give --task {other.name}, or " if fits else ""
            raise ConfigError(f"{{0}} {named} trains on {wants}; {one.folder} holds {held.what} ({give}"
                              f"{_packing(task)})", "task")
    for one in data.val:
        missing = _missing(task, one)
        if missing:
            raise ConfigError(f"{{0}} {one.folder}: validation set {one.name} declares no {missing}; --task "
                              f"{task.name} validates on them ({task.needs[missing]})", "val")
        if one.kind.name not in task.kinds:
            raise ConfigError(f"{{0}} {one.folder}: validation set {one.name} holds {one.kind.what}; --task "
                              f"{task.name} validates on {wants}", "val")


def _missing(task: type[Task], data: DataSet) -> str | None:
    """The first field kind ``task`` needs that the data's manifest does not declare."""
    declared = {field.kind for field in data.manifest.sample_fields()}
    return next((need for need in task.needs if need not in declared), None)


def _packing(task: type[Task]) -> str:
    """How to pack data ``task`` trains on: its kinds' commands."""
    kinds = [KINDS[kind] for kind in task.kinds]
    commands = " or ".join(f"`{command}`" for kind in kinds for command in kind.pack.split(", "))
    return f"pack {' or '.join(kind.what for kind in kinds)} with {commands}"
