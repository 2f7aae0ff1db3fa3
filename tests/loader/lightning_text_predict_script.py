"""Lightning DDP (2 CPU processes) whose DataModule shares one text loader between validation and prediction
(``val_dataloader = predict_dataloader``); used by test_lightning_text_predict.py, not a test module.

``python lightning_text_predict_script.py SHARDS OUT``: validate, then predict. Each process writes
``OUT/rank{r}.json``: the document ids each stage read (a padding repeat as -1), its predicted rows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import lightning.pytorch as pl
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout
import dataio  # noqa: E402


class Data(pl.LightningDataModule):
    def __init__(self, shards: Path) -> None:
        super().__init__()
        self.shards = shards
        self.shared = None

    def predict_dataloader(self):
        if self.shared is None:  # one loader object for both stages
            self.shared = dataio.DataLoader(self.shards, batch_size=4)
        return self.shared

    val_dataloader = predict_dataloader


class Model(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(1024, 4)
        self.read: dict[str, list[int]] = {}

    def _record(self, stage: str, batch) -> torch.Tensor:
        ids, repeated = batch["sample_ids"].tolist(), batch["repeated"].tolist()
        self.read.setdefault(stage, []).extend(-1 if r else int(i) for i, r in zip(ids, repeated, strict=True))
        return self.embed(batch["input_ids"]).mean(dim=(1, 2))

    def validation_step(self, batch, batch_idx):
        self._record("validate", batch)

    def predict_step(self, batch, batch_idx):
        return self._record("predict", batch)


def main() -> None:
    shards, out = Path(sys.argv[1]), Path(sys.argv[2])
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", logger=False, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False, default_root_dir=out)
    model, data = Model(), Data(shards)
    trainer.validate(model, datamodule=data)
    predictions = trainer.predict(model, datamodule=data)
    rank = torch.distributed.get_rank()
    record = {"read": model.read, "predictions": sum(len(p) for p in predictions)}
    (out / f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main()
