"""Configuration of ``dataio train``: one frozen, keyword-only dataclass, validated on construction."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dataio.formats.errors import ConfigError
from dataio.formats.remote.storage import is_remote
from dataio.formats.remote.storage_options import StorageOptions
from dataio.formats.shown import shown
from dataio.mixtures.mixture_plan import MAX_EPOCH
from dataio.train.mixture_schedule import RunSchedule

DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?|mps")  # the devices the trainer knows how to run on
TASKS = ("auto", "classify", "lm", "clip", "segment")  # the kinds' tasks (formats/kinds.py; dataio.train.task_choice)
SOURCE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # a mixture's source: a log.csv column and a TensorBoard tag


def _folder(source: str | Path) -> str | Path:
    """A data folder: an fsspec URL stays a string (``Path`` would fold its ``//``), the rest a Path."""
    return source if is_remote(source) else Path(source)


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Every option of the bundled trainer.

    Images: ``batch_size`` per rank at ``image_size`` (with ``progressive``,
    the resolution ramps from ``image_size * 5 / 7`` and, with
    ``dynamic_batch``, the batch grows as the resolution falls, the LR scaled
    with it). Text (a text model name): ``max_tokens`` per batch in budget
    mode, or ``batch_size`` rows of ``block_size`` tokens with ``pack``.
    ``lr`` is the OneCycle peak; ``warmup`` the share of steps rising to it
    (``dataio.train.schedule``). ``progress_every``: seconds between progress
    lines when stdout is not a terminal (a bar when it is; 0: neither).

    A mixture: ``train={"web": folder, "code": folder}`` and ``weights``, a blend
    ``{name: weight}`` or breakpoints ``[(at, {name: weight}), ...]`` with ``at`` a
    fraction of the planned run (``"90%"``, ``0.9``) or a step (an int), placed in
    the loader's units by ``dataio.train.mixture_schedule``; ``epoch_length`` (the
    loader's units: samples, documents when packing, batches in budget mode) or
    ``epoch_until`` (a source, or "all", finishing a pass) as the loaders'.
    """

    train: Path | str | Mapping[str, Path | str]  # a folder or fsspec URL (kept a string); a dict: a mixture
    # a folder or URL; a dict: named validation sets, each evaluated and logged apart (val_loss/NAME, ...)
    val: Path | str | Mapping[str, Path | str] | None = None
    model: str = "small_cnn"  # the image model, or a CLIP's image tower; a text model for text
    # auto: the task of the train data's declared kind, lm for a text model; segment: semantic segmentation on COCO
    # shards' masks. A task refuses an option it does not honour (dataio.train.task: Task.options)
    task: Literal["auto", "classify", "lm", "clip", "segment"] = "auto"
    context_length: int = 77  # clip: caption tokens kept (the text tower's positions)
    tokenizer: Path | None = None  # clip: tokenise captions as they are read (folders packed without ids)
    out: Path = Path("runs/train")
    epochs: int = 10
    image_size: int = 224
    batch_size: int = 128
    max_tokens: int = 16384
    block_size: int = 512
    pack: bool = False
    optimizer: Literal["sgd", "adamw"] = "sgd"
    lr: float | None = None  # default: 0.1 x batch/256 for SGD, 3e-3 for AdamW
    momentum: float = 0.9
    weight_decay: float | None = None  # default: 5e-5 for SGD, 0.05 for AdamW; never on BN or biases
    warmup: float = 0.1
    label_smoothing: float = 0.1
    randaugment: int = 0  # RandAugment magnitude (0 = off), two ops per image
    mixup: float = 0.0  # MixUp alpha (0 = off)
    cutmix: float = 0.0  # CutMix alpha (0 = off)
    progressive: bool = False
    dynamic_batch: bool = False
    amp: Literal["auto", "bf16", "fp16", "off"] = "auto"  # auto: bf16 on a GPU that has it, fp16 on others, off on CPU
    channels_last: bool = True
    compile: bool = False
    device: str = "auto"  # auto: cuda:<local rank> when there is a GPU, else cpu
    num_workers: int | Literal["auto"] | None = None  # decode threads per rank; auto: measured (images)
    cpu_budget: int | float | None = None  # auto: cores (int) or share of them (float); None: all but one
    profile_steps: int = 0  # > 0: a torch.profiler trace of that many steps in OUT/profile
    seed: int = 0
    checkpoint_every: int = 0  # steps between checkpoints (0: end of each epoch only)
    resume: bool = False  # continue from OUT/checkpoint.pt when it exists
    progress_every: float = 30.0  # seconds between step progress lines off a terminal (0: no step progress)
    tensorboard: bool = False  # TensorBoard scalars in OUT/tensorboard (needs the tensorboard package)
    halt_after_steps: int | None = None  # fault injection for tests: exit abruptly after this many steps
    world_size: int = 1
    rank: int = 0
    local_rank: int = 0
    # for URL train/val folders, passed to the fsspec backend; per URL prefix, train source or validation set
    # (dataio.train.set_options); held as StorageOptions, never printed
    storage_options: Mapping[str, Any] | None = None
    weights: Any = None  # a mixture's blend or schedule (above); held as a RunSchedule
    epoch_length: int | None = None  # a mixture's epoch in the loader's units (default: one pass of every source)
    epoch_until: str | None = None  # or: the epoch ends when this source (or "all") finishes a pass
    # The options set explicitly (the command's flags given): a task refuses one it does not honour even at its
    # default value (--image-size 224 to a text model); empty, an option counts as set when it is not its default
    given: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if isinstance(self.train, Mapping):
            self._check_mixture()
        else:
            object.__setattr__(self, "train", _folder(self.train))
            for name in ("weights", "epoch_length", "epoch_until"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} applies to a mixture: give train as a dict {{name: folder or URL}}")
        object.__setattr__(self, "out", Path(self.out))
        object.__setattr__(self, "storage_options", StorageOptions.of(self.storage_options))
        if isinstance(self.val, Mapping):
            object.__setattr__(self, "val", _named_folders(self.val, "val", "validation set"))
        elif self.val is not None:
            object.__setattr__(self, "val", _folder(self.val))
        if self.task not in TASKS:
            raise ConfigError(f"{{0}} must be one of {', '.join(TASKS)}, got {self.task!r}", "task")
        if self.context_length < 2:
            raise ConfigError(f"{{0}} must be >= 2, got {self.context_length}", "context_length")
        if self.tokenizer is not None:
            object.__setattr__(self, "tokenizer", Path(self.tokenizer))
        for name in ("epochs", "batch_size", "max_tokens", "block_size", "world_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.image_size < 32 or self.image_size % 32:
            raise ValueError(f"image_size must be a multiple of 32, got {self.image_size}")
        if self.optimizer not in ("sgd", "adamw") or self.amp not in ("auto", "bf16", "fp16", "off"):
            raise ValueError(f"optimizer must be sgd|adamw and amp auto|bf16|fp16|off, got "
                             f"{self.optimizer!r}, {self.amp!r}")
        if not 0 <= self.warmup < 1 or not 0 <= self.label_smoothing < 1:
            raise ValueError("warmup and label_smoothing must be in [0, 1)")
        if not 0 <= self.randaugment <= 10 or self.mixup < 0 or self.cutmix < 0:
            raise ValueError("randaugment must be in 0..10, mixup and cutmix >= 0")
        for name in ("lr", "weight_decay", "mixup", "cutmix", "warmup", "label_smoothing"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ConfigError(f"{{0}} must be a finite number, got {value}", name)
        if self.lr is not None and self.lr <= 0:
            raise ConfigError(f"{{0}} must be > 0, got {self.lr}", "lr")
        if self.weight_decay is not None and self.weight_decay < 0:
            raise ConfigError(f"{{0}} must be >= 0, got {self.weight_decay}", "weight_decay")
        if not DEVICE.fullmatch(self.device):
            raise ConfigError(f"{{0}} must be auto, cpu, cuda, cuda:N or mps, got {self.device!r}", "device")
        if not (math.isfinite(self.progress_every) and self.progress_every >= 0):
            raise ConfigError(f"{{0}} must be a number of seconds >= 0, got {self.progress_every}", "progress_every")
        if self.checkpoint_every < 0:
            raise ValueError("checkpoint_every must be >= 0")
        if self.profile_steps < 0:
            raise ValueError(f"profile_steps must be >= 0, got {self.profile_steps}")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} is not in 0..{self.world_size - 1}")
        if self.dynamic_batch and not self.progressive:
            raise ValueError("dynamic_batch needs progressive")

    def _check_mixture(self) -> None:
        assert isinstance(self.train, Mapping)
        sources = _named_folders(self.train, "train", "source")
        object.__setattr__(self, "train", sources)
        if self.weights is None:
            raise ValueError("weights: a mixture (train as a dict of sources) needs weights, e.g. {name: share}")
        object.__setattr__(self, "weights", RunSchedule.of(self.weights, tuple(sources)))
        if self.epoch_length is not None and self.epoch_until is not None:
            raise ValueError("give one of epoch_length and epoch_until")
        if self.epoch_length is not None and not (isinstance(self.epoch_length, int) and not isinstance(
                self.epoch_length, bool) and 1 <= self.epoch_length <= MAX_EPOCH):
            raise ConfigError(f"{{0}} must be >= 1 and at most {MAX_EPOCH:,} (an integer: an epoch is held in "
                              f"memory), got {shown(self.epoch_length)}", "epoch_length")
        if self.epoch_until is not None and self.epoch_until != "all" and self.epoch_until not in sources:
            raise ValueError(f"epoch_until: {self.epoch_until!r} is not a source ({', '.join(sources)}) or 'all'")
        if self.epoch_until is not None and self.weights.uses_fractions:
            raise ValueError("weights: breakpoints in fractions of training need epochs of a known length, and with "
                             "epoch_until an epoch's length depends on the blend: give breakpoints in steps, or "
                             "epoch_length")

    @property
    def mixture(self) -> bool:
        """Whether ``train`` is a mixture of named sources."""
        return isinstance(self.train, dict)

    @property
    def peak_lr(self) -> float:
        if self.lr is not None:
            return self.lr
        return 0.1 * self.batch_size * self.world_size / 256 if self.optimizer == "sgd" else 3e-3

    @property
    def decay(self) -> float:
        if self.weight_decay is not None:
            return self.weight_decay
        return 5e-5 if self.optimizer == "sgd" else 0.05


def _named_folders(folders: Mapping[str, Path | str], field: str, what: str) -> dict[str, Path | str]:
    """``{name: folder or URL}`` checked: at least one, names fit for log columns, each with a folder."""
    named = {str(name): _folder(folder) for name, folder in folders.items()}
    if not named:
        raise ValueError(f"{field}: a dict needs at least one {what}")
    for name, folder in named.items():
        if not SOURCE_NAME.fullmatch(name):
            raise ValueError(f"{field}: {what} name {name!r} must be letters, digits, '_', '.' or '-' (it names "
                             "log columns)")
        if not str(folder):
            raise ValueError(f"{field}: {what} {name!r} has no folder")
    return named
