"""PyTorch Lightning with dataio loaders from a ``LightningDataModule``; used by test_lightning.py, not a test module.

``fit`` runs one ``Trainer.fit`` and returns, per step, the epoch and the
colour indices (tests.conftest.colour_of) of the images trained on. Run as a
script under ``torchrun`` it fits with DDP on 2 CPU processes (gloo): first
until ``--stop-after`` steps, saving a checkpoint mid-epoch, then a fresh
Trainer, model and data module resume from that checkpoint to the end, as
after a kill.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for tests.conftest
import dataio  # noqa: E402
from tests.conftest import index_of  # noqa: E402

BATCH = 4


class ColourData(pl.LightningDataModule):
    def __init__(self, shards: Path) -> None:
        super().__init__()
        self.shards = shards

    def train_dataloader(self):
        # built when the Trainer asks, inside the process group: the loader reads rank and world size from it
        return dataio.DataLoader(self.shards, batch_size=BATCH, shuffle=True, num_workers=1, image_size=16, seed=1,
                                 normalize=False)  # uint8: the colour indices are read back from the pixels


class TinyModel(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, stride=2), torch.nn.ReLU(),
                                       torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3))
        self.seen: list[tuple[int, list[int]]] = []

    def training_step(self, batch, batch_idx):
        images, labels = batch
        self.seen.append((self.current_epoch, [index_of(image.numpy()) for image in images]))
        return torch.nn.functional.cross_entropy(self.net(images.float().div(255)), labels)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def fit(shards: Path, out: Path, *, devices: int = 1, epochs: int = 2, stop_after: int = -1,
        resume: Path | None = None) -> list[tuple[int, list[int]]]:
    """One ``Trainer.fit`` (with a checkpoint every ``stop_after`` steps when stopping there); the steps seen."""
    callbacks = [ModelCheckpoint(dirpath=out, every_n_train_steps=stop_after, save_top_k=-1)] if stop_after > 0 else []
    trainer = pl.Trainer(accelerator="cpu", devices=devices, strategy="ddp" if devices > 1 else "auto",
                         max_epochs=epochs, max_steps=stop_after, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=bool(callbacks), callbacks=callbacks,
                         num_sanity_val_steps=0, default_root_dir=out)
    model = TinyModel()
    trainer.fit(model, datamodule=ColourData(shards), ckpt_path=resume)
    return model.seen


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("shards", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--stop-after", type=int, required=True)
    args = parser.parse_args()
    first = fit(args.shards, args.out, devices=2, stop_after=args.stop_after)
    checkpoints = sorted(args.out.glob(f"*step={args.stop_after}.ckpt"))
    rest = fit(args.shards, args.out, devices=2, resume=checkpoints[0])
    rank = torch.distributed.get_rank()
    (args.out / f"rank{rank}.json").write_text(json.dumps({"first": first, "rest": rest}))


if __name__ == "__main__":
    main()
