"""What the Lightning DDP scripts of the tests share (2 CPU processes, a DataModule whose one loader serves both
validation and prediction: ``val_dataloader = predict_dataloader``, a common pattern): the trainer, the DataModule,
the models that record the sample ids each stage reads (a padding repeat as -1). Not a test module."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch


def ddp_trainer(out: Path, **options: Any) -> pl.Trainer:
    """Lightning's DDP on 2 CPU processes, without logger, progress bar, summary or checkpoints."""
    return pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", logger=False, enable_progress_bar=False,
                      enable_model_summary=False, enable_checkpointing=False, default_root_dir=out, **options)


def read_ids(ids, repeated) -> list[int]:
    """A batch's sample ids, a padding repeat as -1."""
    return [-1 if r else int(i) for i, r in zip(ids, repeated, strict=True)]


class SharedLoaderData(pl.LightningDataModule):
    """One loader object for validation and prediction, built by ``build`` at the first ask."""

    def __init__(self, build: Callable[[], Any]) -> None:
        super().__init__()
        self.build, self.shared = build, None

    def predict_dataloader(self):
        if self.shared is None:  # one loader object for both stages
            self.shared = self.build()
        return self.shared

    val_dataloader = predict_dataloader


class TrainingSharedLoaderData(SharedLoaderData):
    """``SharedLoaderData`` with a training loader of its own, built by ``train``."""

    def __init__(self, build: Callable[[], Any], train: Callable[[], Any]) -> None:
        super().__init__(build)
        self.build_train = train

    def train_dataloader(self):
        return self.build_train()


class ImageModel(pl.LightningModule):
    """A linear classifier of 16x16 images; ``read[stage]``: the ids each stage read (``stage`` if set, else the
    hook's own: train, validate, predict)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 3))
        self.read: dict[str, list[int]] = {}
        self.stage = ""

    def _record(self, stage: str, batch) -> torch.Tensor:
        images, labels, ids, repeated = batch
        self.read.setdefault(self.stage or stage, []).extend(read_ids(ids, repeated))
        return torch.nn.functional.cross_entropy(self.net(images.float().div(255)), labels)

    def training_step(self, batch, batch_idx):
        return self._record("train", batch)

    def validation_step(self, batch, batch_idx):
        self._record("validate", batch)

    def predict_step(self, batch, batch_idx):
        self._record("predict", batch)
        return self.net(batch[0].float().div(255)).argmax(1)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


class TextModel(pl.LightningModule):
    """A mean of token embeddings per row; ``read[stage]``: the document ids each stage read."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(1024, 4)
        self.read: dict[str, list[int]] = {}

    def _record(self, stage: str, batch) -> torch.Tensor:
        self.read.setdefault(stage, []).extend(read_ids(batch["sample_ids"].tolist(), batch["repeated"].tolist()))
        return self.embed(batch["input_ids"]).mean(dim=(1, 2))

    def validation_step(self, batch, batch_idx):
        self._record("validate", batch)

    def predict_step(self, batch, batch_idx):
        return self._record("predict", batch)
