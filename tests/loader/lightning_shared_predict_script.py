"""Lightning DDP (2 CPU processes) whose DataModule shares one loader between validation and prediction
(``val_dataloader = predict_dataloader``, a common pattern); used by test_lightning_shared_predict.py, not a test
module.

``python lightning_shared_predict_script.py SHARDS OUT``: fit one epoch with validation, then predict. Each
process writes ``OUT/rank{r}.json``: the sample ids each stage read (a padding repeat as -1), its predictions.
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

    def train_dataloader(self):
        return dataio.DataLoader(self.shards, batch_size=4, shuffle=True, num_workers=1, image_size=16,
                                 normalize=False).with_ids()

    def predict_dataloader(self):
        if self.shared is None:  # one loader object for both stages
            self.shared = dataio.DataLoader(self.shards, batch_size=4, num_workers=1, image_size=16,
                                            normalize=False).with_ids()
        return self.shared

    val_dataloader = predict_dataloader


class Model(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 3))
        self.read: dict[str, list[int]] = {}

    def _record(self, stage: str, batch) -> torch.Tensor:
        images, labels, ids, repeated = batch
        self.read.setdefault(stage, []).extend(-1 if r else int(i) for i, r in zip(ids, repeated, strict=True))
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


def main() -> None:
    shards, out = Path(sys.argv[1]), Path(sys.argv[2])
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=1, limit_train_batches=2,
                         logger=False, enable_progress_bar=False, enable_model_summary=False,
                         enable_checkpointing=False, num_sanity_val_steps=0, default_root_dir=out)
    model, data = Model(), Data(shards)
    trainer.fit(model, datamodule=data)
    predictions = trainer.predict(model, datamodule=data)
    rank = torch.distributed.get_rank()
    record = {"read": model.read, "predictions": sum(len(p) for p in predictions)}
    (out / f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main()
