"""A Lightning DDP job (2 CPU processes) whose DataModule returns dataio loaders from its hooks; used by
tests/client_patterns/test_user_patterns.py, not a test module.

``python lightning_script.py TRAIN VAL OUT``: ``fit`` (2 epochs, with the sanity check), ``validate``, ``predict``.
Rank 0 writes ``OUT/result.json``: the seconds each stage took and how many samples each rank predicted.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import lightning as L
import torch

import dataio


class Data(L.LightningDataModule):
    def __init__(self, train, val):
        super().__init__()
        self.train, self.val = train, val

    def train_dataloader(self):
        return dataio.DataLoader(self.train, batch_size=4, shuffle=True, num_workers=1, image_size=16)

    def val_dataloader(self):
        return dataio.DataLoader(self.val, batch_size=4, num_workers=1, image_size=16).with_ids()

    def predict_dataloader(self):
        return dataio.DataLoader(self.val, batch_size=4, num_workers=1, image_size=16, even_batches=False)


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(3 * 16 * 16, 3)
        self.predicted = 0

    def training_step(self, batch, _):
        images, labels = batch[0], batch[1]
        return torch.nn.functional.cross_entropy(self.net(images.flatten(1)), labels)

    def validation_step(self, batch, _):
        self.log("val_loss", torch.nn.functional.cross_entropy(self.net(batch[0].flatten(1)), batch[1]),
                 sync_dist=True)

    def predict_step(self, batch, _):
        self.predicted += len(batch[1])
        return self.net(batch[0].flatten(1))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    train, val, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=2, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    model, data = Model(), Data(train, val)
    times = {}
    t0 = time.perf_counter()
    trainer.fit(model, datamodule=data)
    times["fit"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    trainer.validate(model, datamodule=data, verbose=False)
    times["validate"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    trainer.predict(model, datamodule=data, return_predictions=False)
    times["predict"] = time.perf_counter() - t0
    predicted = trainer.strategy.all_gather(torch.tensor(model.predicted)).tolist()
    if trainer.global_rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        (out / "result.json").write_text(json.dumps({"seconds": times, "predicted": predicted}))
    trainer.strategy.barrier()
    os._exit(0)


if __name__ == "__main__":
    main()
