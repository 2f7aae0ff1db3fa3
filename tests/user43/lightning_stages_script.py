"""A user's Lightning DDP run (2 CPU processes) over dataio.DataLoader, stages in the order a user runs them
after loading a checkpoint: predict, then validate, then predict again, over one loader shared by
``val_dataloader = predict_dataloader``; then a second Trainer with ``use_distributed_sampler=False`` validates.
Not a test module: ``python lightning_stages_script.py SHARDS OUT`` writes ``OUT/rank{r}.json``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import lightning.pytorch as pl
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout
import dataio  # noqa: E402


class Data(pl.LightningDataModule):
    def __init__(self, shards: Path) -> None:
        super().__init__()
        self.shards, self.shared = shards, None

    def predict_dataloader(self):
        if self.shared is None:
            self.shared = dataio.DataLoader(self.shards, batch_size=4, num_workers=1, image_size=16,
                                            normalize=False).with_ids()
        return self.shared

    val_dataloader = predict_dataloader


class Model(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 3))
        self.read: dict[str, list[int]] = {}
        self.stage = ""

    def _record(self, batch) -> None:
        images, labels, ids, repeated = batch
        self.read.setdefault(self.stage, []).extend(-1 if r else int(i) for i, r in zip(ids, repeated, strict=True))

    def validation_step(self, batch, batch_idx):
        self._record(batch)

    def predict_step(self, batch, batch_idx):
        self._record(batch)
        return self.net(batch[0].float().div(255)).argmax(1)


def trainer(out: Path, **options) -> pl.Trainer:
    return pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", logger=False, enable_progress_bar=False,
                      enable_model_summary=False, enable_checkpointing=False, default_root_dir=out, **options)


def main() -> None:
    shards, out = Path(sys.argv[1]), Path(sys.argv[2])
    model, data = Model(), Data(shards)
    first = trainer(out)
    counts = {}
    for stage in ("predict1", "validate", "predict2"):
        model.stage = stage
        if stage.startswith("predict"):
            counts[stage] = sum(len(p) for p in first.predict(model, datamodule=data))
        else:
            first.validate(model, datamodule=data, verbose=False)
    model.stage = "validate_unsharded"  # Lightning leaves a loader whole on every rank here
    trainer(out, use_distributed_sampler=False).validate(model, datamodule=Data(shards), verbose=False)
    rank = torch.distributed.get_rank()
    (out / f"rank{rank}.json").write_text(json.dumps({"read": model.read, "counts": counts}))
    torch.distributed.barrier()
    os._exit(0)  # gloo's teardown aborts now and then (docs/dataloader.md)


if __name__ == "__main__":
    main()
