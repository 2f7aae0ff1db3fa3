"""Lightning DDP with dataio loaders built in the DataModule's ``__init__``, before any process group exists (as
many DataModules do); used by test_frameworks_late_world.py, not a test module.

``python lightning_late_script.py SHARDS OUT`` runs ``Trainer(strategy="ddp", devices=2)`` on the CPU: Lightning
starts the second process itself and sets up the process group after the loaders were built. It fits one epoch
(no sanity check), then validates and predicts. Each process writes ``OUT/rank{r}.json``: its training steps and
the sample ids each stage read (repeats flagged), its predictions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import lightning.pytorch as pl
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for tests.loader
import dataio  # noqa: E402

BATCH = 4


class EarlyData(pl.LightningDataModule):
    def __init__(self, shards: Path) -> None:
        super().__init__()
        options = dict(batch_size=BATCH, num_workers=1, image_size=16, normalize=False)
        # Built here, in the launching process and again in each DDP child, before Trainer.fit sets up DDP.
        self.train = dataio.DataLoader(shards, shuffle=True, seed=1, **options)
        self.val = dataio.DataLoader(shards, train=False, **options)
        self.predict = dataio.DataLoader(shards, train=False, even_batches=False, **options)  # no repeats

    def train_dataloader(self):
        return self.train.with_ids()

    def val_dataloader(self):
        return self.val.with_ids()

    def predict_dataloader(self):
        return self.predict.with_ids()


class Model(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 3))
        self.read: dict[str, list[list[int]]] = {}

    def _record(self, stage: str, batch) -> torch.Tensor:
        images, labels, ids, repeated = batch
        self.read.setdefault(stage, []).append([int(i) for i in ids[~repeated]] + [-1] * int(repeated.sum()))
        return torch.nn.functional.cross_entropy(self.net(images.float().div(255)), labels)

    def training_step(self, batch, batch_idx):
        return self._record("train", batch)

    def validation_step(self, batch, batch_idx):
        self._record("validate" if self.trainer.state.fn == "validate" else "fit_val", batch)

    def predict_step(self, batch, batch_idx):
        self._record("predict", batch)
        return self.net(batch[0].float().div(255)).argmax(1)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("shards", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    data = EarlyData(args.shards)
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=1, logger=False,
                         enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
                         num_sanity_val_steps=0, default_root_dir=args.out)
    model = Model()
    trainer.fit(model, datamodule=data)
    trainer.validate(model, datamodule=data, verbose=False)
    predictions = trainer.predict(model, datamodule=data)
    rank = torch.distributed.get_rank()
    record = {"world": [data.train.world_size, data.train.rank], "read": model.read,
              "predictions": sum(len(p) for p in predictions), "train_len": trainer.num_training_batches}  # len outside the trainer: the whole set, as torch
    (args.out / f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main()
