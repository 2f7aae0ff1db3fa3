"""What ``dataio train`` asks of a task: the ``Task`` protocol, and the options every task honours.

A task is one way to train on one kind of sample (``dataio.formats.kinds``: each kind names its task). The
trainer (``trainer.py``) drives it through this protocol alone: it builds the model, counts the steps of each
epoch, takes its batches and their loss, evaluates, checkpoints its train loader and closes it. The choice of the
task (``task_choice.py``) reads what each task class declares: its ``--task`` name, the kinds it trains on, the
declared fields it needs beyond its kind's, whether ``--task auto`` picks it, the model it trains, and the
options of ``TrainConfig`` it honours beyond ``COMMON_OPTIONS``; an option a task does not honour, set, is refused
in one line before any loader starts, rather than accepted and ignored.

A task class is made as ``Task(config, device, data=run_data)`` (``task_choice.RunData``: the run's manifests,
read once): its loaders are the faces of its kinds (``ImageLoader``, ``PairLoader``, ``DetectionLoader``,
``TextLoader``), and what it needs of the data (classes, sample counts) comes from them or from ``data``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn

# The TrainConfig fields the trainer itself uses for every task (the data, model and task, the loop, the optimizer
# and its schedule, precision, checkpoints, logs, the ranks, a mixture's blend): none is a task's to refuse.
# batch_size is one: the default LR scales with it (TrainConfig.peak_lr), for text in budget mode too.
COMMON_OPTIONS = frozenset({
    "train", "val", "model", "task", "storage_options", "weights", "epoch_length", "epoch_until",
    "out", "epochs", "batch_size", "seed", "optimizer", "lr", "momentum", "weight_decay", "warmup",
    "amp", "compile", "device", "profile_steps", "checkpoint_every", "resume", "progress_every", "tensorboard",
    "halt_after_steps", "world_size", "rank", "local_rank", "given",
})


@runtime_checkable
class TrainLoader(Protocol):
    """What the trainer uses of a task's train loader: epochs, length, the position a checkpoint keeps, stats."""

    @property
    def epoch(self) -> int: ...
    @property
    def position(self) -> Any: ...  # ``EpochPosition``: ``position.before`` on resume
    @property
    def stats(self) -> Any: ...  # ``LoaderStats``: stage times and threads for the run's summary
    def set_epoch(self, epoch: int) -> None: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __len__(self) -> int: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...
    def close(self) -> None: ...


class Tally(Protocol):
    """A mixture's per-source counts (``mixture_counts``): the trainer logs them per step and per epoch."""

    @property
    def names(self) -> tuple[str, ...]: ...
    def begin_pass(self) -> None: ...
    def step(self) -> np.ndarray: ...
    def as_dict(self, counts: np.ndarray) -> dict[str, list[int]]: ...
    def epoch_summary(self) -> dict[str, dict[str, int]]: ...


@runtime_checkable
class Task(Protocol):
    """One way to train: what the trainer drives (the instance) and what the choice reads (the class's declarations).

    ``loss`` returns the batch's loss and its count in ``unit`` (images, or tokens); ``evaluate`` the validation
    metrics (``val_<metric>``, per set with named sets), summed over ranks; ``mixture_record`` what a resume of a
    mixture must find unchanged (None for one source); ``lr_scale`` the LR factor of an epoch (a dynamic batch).
    """

    # declared by the class, read by the choice (task_choice) before any loader starts
    name: ClassVar[str]  # its --task value
    kinds: ClassVar[tuple[str, ...]]  # the kinds of sample it trains on (dataio.formats.kinds)
    needs: ClassVar[Mapping[str, str]]  # declared field kinds it reads beyond its kinds' -> how to pack them
    not_auto: ClassVar[str]  # why --task auto does not pick it for its kinds (the refusal after the folder), or ""
    model: ClassVar[Literal["image", "text"]]  # the --model it trains
    options: ClassVar[frozenset[str]]  # the TrainConfig fields it honours beyond COMMON_OPTIONS
    refused: ClassVar[Mapping[str, str]]  # why it refuses an option another task honours, where there is more to say
    # what the trainer uses (read-only: a task may hold a narrower type, ImageLoader, ReadTally)
    @property
    def unit(self) -> str: ...  # what a step's count counts: "img" or "tokens"
    @property
    def val_metrics(self) -> tuple[str, ...]: ...  # each validation set's metrics, as val_<metric>/<set>
    @property
    def train_loader(self) -> TrainLoader: ...
    @property
    def tally(self) -> Tally | None: ...  # a mixture's per-source counts; None for one source
    def build_model(self) -> nn.Module: ...
    def steps_in_epoch(self, epoch: int) -> int: ...
    def lr_scale(self, epoch: int) -> float: ...
    def train_batches(self) -> Iterator[Any]: ...
    def loss(self, model: nn.Module, batch: Any) -> tuple[torch.Tensor, int]: ...
    def evaluate(self, model: nn.Module) -> dict[str, float]: ...
    def mixture_record(self) -> dict | None: ...
    def close(self) -> None: ...
