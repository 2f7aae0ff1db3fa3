"""What ``dataio train`` does with image shards: loaders, model, loss and evaluation."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Literal

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

from dataio.augment import MixConfig, RandAugmentConfig, ResolutionSchedule
from dataio.images.kind_loader import ImageKindLoader
from dataio.images.loader import ImageLoader
from dataio.train.models import build_image_model
from dataio.train.config import TrainConfig
from dataio.train.mixture_counts import ReadTally
from dataio.train.mixture_schedule import RunUnits
from dataio.train.set_options import train_options, val_options
from dataio.train.task_choice import RunData
from dataio.train.val_sets import val_metrics, val_sets

# what every image task honours: the images' size and layout, the decode threads
IMAGE_OPTIONS = frozenset({"image_size", "num_workers", "cpu_budget", "channels_last"})


def _schedule(c: TrainConfig) -> ResolutionSchedule | None:
    if not c.progressive:
        return None
    start = max(32, round(c.image_size * 5 / 7 / 32) * 32)
    return ResolutionSchedule(epochs=c.epochs, start_size=start, end_size=c.image_size,
                              ramp_end=max(1, round(c.epochs * 0.85)), batch_size=c.batch_size,
                              dynamic_batch=c.dynamic_batch)


def image_options(config: TrainConfig, device: torch.device) -> dict[str, Any]:
    """The loader keywords of every image task's loaders: decode threads, the device copy, the ranks, the seed."""
    c = config
    return dict(num_workers=c.num_workers, cpu_budget=c.cpu_budget, profile=c.profile_steps > 0, device=str(device),
                normalize=True, channels_last=c.channels_last, pin_memory=device.type == "cuda",
                world_size=c.world_size, rank=c.rank, seed=c.seed)


class ImageTask:
    """Train on ``config.train`` shards, evaluate with center crops on ``config.val``."""

    name: ClassVar[str] = "classify"
    kinds: ClassVar[tuple[str, ...]] = ("classification",)
    needs: ClassVar[Mapping[str, str]] = {}
    not_auto: ClassVar[str] = ""
    model: ClassVar[Literal["image", "text"]] = "image"
    options: ClassVar[frozenset[str]] = IMAGE_OPTIONS | {"label_smoothing", "randaugment", "mixup", "cutmix",
                                                         "progressive", "dynamic_batch"}
    refused: ClassVar[Mapping[str, str]] = {}
    unit = "img"
    val_metrics = ("acc", "loss")  # each validation set's, as val_acc/NAME ... (val_sets)
    train_loader: ImageKindLoader  # the face of the task's kind: ImageLoader here, DetectionLoader for segment
    val_loaders: dict[str, ImageKindLoader]

    def __init__(self, config: TrainConfig, device: torch.device, *, data: RunData | None = None) -> None:
        c = config
        self.config, self.device = c, device
        data = data or RunData(c)  # the classes and samples a mixture's loader needs before it starts
        common = image_options(c, device)
        options, val_options_of = train_options(c), val_options(c)  # each data set's own (set_options)
        self.num_classes = len(data.classes)
        mixture = self._mixture(data.samples) if c.mixture else {}
        mix = None
        if c.mixup or c.cutmix:
            mix = MixConfig(num_classes=self.num_classes, mixup_alpha=c.mixup, cutmix_alpha=c.cutmix,
                            label_smoothing=c.label_smoothing)
        self.schedule = _schedule(c)
        self.train_loader = ImageLoader(
            c.train, batch_size=c.batch_size, image_size=c.image_size, train=True, schedule=self.schedule,
            randaugment=RandAugmentConfig(magnitude=c.randaugment) if c.randaugment else None, mix=mix, **mixture,
            storage_options=options, **common)
        self.val_loaders = {name: ImageLoader(folder, batch_size=c.batch_size, image_size=c.image_size, train=False,
                                              storage_options=val_options_of[name], **common)
                            for name, folder in val_sets(c.val).items()}
        self.tally = ReadTally(self.train_loader, c.weights.names) if c.mixture else None
        if c.mixture and len(self.train_loader.classes) != self.num_classes:
            raise ValueError(f"train: the mixture's sources hold {self.num_classes} classes, the loader maps "
                             f"{len(self.train_loader.classes)}")
        self.val_labels = {name: self._val_labels(name, loader) for name, loader in self.val_loaders.items()}

    def _val_labels(self, name: str, loader: ImageKindLoader) -> torch.Tensor | None:
        """The model's class of each validation label, by class name: the model predicts the train folder's
        classes (a mixture's combined class map, ``train_loader.classes``), which need not number the validation
        folder's classes as it does (a val folder holding some of them). None when they coincide."""
        train, val = self.train_loader.classes, loader.classes
        if tuple(val) == tuple(train[:len(val)]):
            return None
        index = {name: i for i, name in enumerate(train)}
        missing = [name for name in val if name not in index]
        if missing or not val:  # a label past the model's outputs would fail after the first epoch's training
            which = f"val set {name}" if isinstance(self.config.val, dict) else "val"
            where = "source of the mixture" if self.config.mixture else "folder"
            raise ValueError(f"{which}: classes {missing[:5] or '(unnamed)'} are in no train {where} "
                             f"({len(train)} classes): the model cannot predict them")
        return torch.tensor([index[name] for name in val], dtype=torch.int64, device=self.device)

    def _mixture(self, samples: int) -> dict:
        """ImageLoader's mixture keywords: the schedule placed in samples (a step takes ``world_size x
        batch_size``; with ``dynamic_batch`` the batch varies, so steps are placed at the base batch size)."""
        c = self.config
        units = RunUnits(epochs=c.epochs, epoch_units=None if c.epoch_until else c.epoch_length or samples,
                         per_step=c.world_size * c.batch_size, unit="samples")
        weights = c.weights.first_blend() if c.weights.constant else c.weights.resolve(units)
        self.mixture_units = units
        return dict(weights=weights, epoch_length=c.epoch_length, epoch_until=c.epoch_until)

    def mixture_record(self) -> dict | None:
        """What a resume must find unchanged: the sources' names, the placed schedule and the epoch rule."""
        c = self.config
        if not c.mixture:
            return None
        schedule = c.weights.resolve(self.mixture_units)
        return {"sources": list(schedule.names), "points": [[p, list(w)] for p, w in schedule.points],
                "interpolation": schedule.interpolation, "unit": "samples", "epoch_length": c.epoch_length,
                "epoch_until": c.epoch_until}

    def build_model(self) -> nn.Module:
        model = build_image_model(self.config.model, self.num_classes)
        return model.to(memory_format=torch.channels_last) if self.config.channels_last else model

    def steps_in_epoch(self, epoch: int) -> int:
        self.train_loader.set_epoch(epoch)
        return len(self.train_loader)

    def lr_scale(self, epoch: int) -> float:
        return self.schedule.lr_scale(epoch) if self.schedule and self.config.dynamic_batch else 1.0

    def train_batches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return iter(self.train_loader)

    def loss(self, model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, int]:
        images, labels = batch
        logits = model(images)
        smoothing = 0.0 if labels.is_floating_point() else self.config.label_smoothing  # mix targets are smoothed
        return F.cross_entropy(logits.float(), labels, label_smoothing=smoothing), len(labels)

    @torch.no_grad()
    def evaluate(self, model: nn.Module) -> dict[str, float]:
        """Top-1 accuracy and loss over each validation set (``val_sets``), padding repeats dropped, summed over
        ranks."""
        if not self.val_loaders:
            return {}
        model.eval()
        totals = {name: self._evaluate_set(model, loader, self.val_labels[name])
                  for name, loader in self.val_loaders.items()}
        model.train()
        return val_metrics(totals, _accuracy_and_loss, named=isinstance(self.config.val, dict))

    def _evaluate_set(self, model: nn.Module, loader: ImageKindLoader, label_map: torch.Tensor | None) -> list[float]:
        totals = torch.zeros(3, dtype=torch.float64, device=self.device)  # correct, count, loss sum
        loader.set_epoch(0)
        for batch in loader.batches():
            keep = torch.from_numpy(~batch.repeated).to(self.device)
            logits = model(batch.images).float()
            labels = batch.labels if label_map is None else label_map[batch.labels]
            losses = F.cross_entropy(logits, labels, reduction="none")
            totals += torch.stack([((logits.argmax(1) == labels) & keep).sum().double(),
                                   keep.sum().double(), (losses * keep).sum().double()])
        if dist.is_initialized():
            dist.all_reduce(totals)
        return totals.tolist()

    def close(self) -> None:
        self.train_loader.close()
        for loader in self.val_loaders.values():
            loader.close()


def _accuracy_and_loss(totals: list[float]) -> dict[str, float]:
    correct, count, loss = totals
    return {"acc": correct / max(count, 1), "loss": loss / max(count, 1)}
