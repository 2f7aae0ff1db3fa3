"""Lightning's ``ddp_spawn`` with dataio loaders built in the DataModule's ``__init__``; used by
test_lightning_spawn.py, not a test module.

``python lightning_spawn_script.py SHARDS OUT``: ``Trainer(strategy="ddp_spawn", devices=2)`` on the CPU pickles the
DataModule, its loaders included, into two spawned processes (as it does in notebooks and wherever a script is not
re-run per rank). Each process fits one epoch with validation and writes ``OUT/rank{r}.json`` at the end of fit:
the sample ids each stage read (repeats flagged -1) and the world its loaders took.
"""

from __future__ import annotations

import argparse
import json
import logging
import warnings
from pathlib import Path

import lightning.pytorch as pl
import torch

import dataio

warnings.filterwarnings("ignore")
for name in ("lightning.pytorch", "lightning.fabric"):  # its banners (run again in each spawned process): the test
    logging.getLogger(name).setLevel(logging.ERROR)      # asserts that nothing else reaches stderr


class EarlyData(pl.LightningDataModule):
    def __init__(self, shards: Path) -> None:
        super().__init__()
        options = dict(batch_size=4, num_workers=1, image_size=16, normalize=False)
        self.train = dataio.DataLoader(shards, shuffle=True, seed=1, **options)  # pickled with the DataModule
        self.val = dataio.DataLoader(shards, train=False, **options)

    def train_dataloader(self):
        return self.train.with_ids()

    def val_dataloader(self):
        return self.val.with_ids()


class Model(pl.LightningModule):
    def __init__(self, out: Path) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 3))
        self.out, self.read = out, {"train": [], "val": []}

    def _record(self, stage: str, batch) -> torch.Tensor:
        images, labels, ids, repeated = batch
        self.read[stage].append([int(i) for i in ids[~repeated]] + [-1] * int(repeated.sum()))
        return torch.nn.functional.cross_entropy(self.net(images.float().div(255)), labels)

    def training_step(self, batch, batch_idx):
        return self._record("train", batch)

    def validation_step(self, batch, batch_idx):
        self._record("val", batch)

    def on_fit_end(self) -> None:
        loader = self.trainer.datamodule.train
        record = {"read": self.read, "world": [loader.world_size, loader.rank]}
        (self.out / f"rank{self.global_rank}.json").write_text(json.dumps(record))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("shards", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp_spawn", max_epochs=1, logger=False,
                         enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
                         num_sanity_val_steps=0, default_root_dir=args.out)
    trainer.fit(Model(args.out), datamodule=EarlyData(args.shards))


if __name__ == "__main__":
    main()
