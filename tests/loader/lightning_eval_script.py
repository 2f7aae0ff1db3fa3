"""Lightning with dataio train, val, test and predict loaders from a ``LightningDataModule``; used by
test_lightning_eval.py, not a test module.

``python lightning_eval_script.py SHARDS OUT`` fits one epoch with train and
val loaders and the default sanity check, then runs ``validate``, ``test`` and
``predict``; run under ``torchrun --nproc-per-node 2`` it does so with DDP on
2 CPU processes (gloo). Validation and prediction read ``loader.with_ids()``
and leave padding repeats out by ``batch.repeated``; test reads the plain
loader, ``(images, labels)``. Each process writes ``OUT/rank{r}.json``: per
stage, the sample ids its steps counted (test: the colour index of each
image), the repeats left out, and the metrics Lightning logged.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import lightning.pytorch as pl
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for tests.loader
import dataio  # noqa: E402
from tests.conftest import index_of  # noqa: E402
from tests.loader.lightning_script import BATCH, TinyModel  # noqa: E402


class EvalData(pl.LightningDataModule):
    def __init__(self, shards: Path) -> None:
        super().__init__()
        self.shards = shards

    def train_dataloader(self):
        return dataio.DataLoader(self.shards, batch_size=BATCH, shuffle=True, num_workers=1, image_size=16, seed=1,
                                 normalize=False)  # uint8: test reads the samples back from their colours

    def _eval_loader(self):
        # built inside the process group: each rank reads its share, padded so that every rank runs the same steps
        return dataio.DataLoader(self.shards, batch_size=BATCH, num_workers=1, image_size=16, train=False,
                                 normalize=False)

    def val_dataloader(self):
        return self._eval_loader().with_ids()  # batches carry sample ids and the padding flags

    def test_dataloader(self):
        return self._eval_loader()  # plain (images, labels), as a script that swapped DataLoader has it

    def predict_dataloader(self):
        return self._eval_loader().with_ids()


class EvalModel(TinyModel):
    def __init__(self) -> None:
        super().__init__()
        self.counted: dict[str, list[int]] = {}
        self.repeats: dict[str, int] = {}
        self.sanity_batches = 0

    def _count(self, stage: str, batch) -> torch.Tensor:
        images, labels, ids, repeated = batch
        keep = torch.from_numpy(~repeated)
        self.counted.setdefault(stage, []).extend(ids[~repeated].tolist())
        self.repeats[stage] = self.repeats.get(stage, 0) + int(repeated.sum())
        right = (self.net(images.float().div(255)).argmax(1) == labels)[keep]
        self.log(f"{stage}_samples", float(keep.sum()), reduce_fx="sum", sync_dist=True, batch_size=len(ids))
        self.log(f"{stage}_right", float(right.sum()), reduce_fx="sum", sync_dist=True, batch_size=len(ids))
        return right

    def validation_step(self, batch, batch_idx):
        if self.trainer.sanity_checking:
            self.sanity_batches += 1
            return
        self._count("fit_val" if self.trainer.state.fn == "fit" else "validate", batch)

    def test_step(self, batch, batch_idx):
        images, labels = batch  # no ids: the images' colours tell the samples apart
        self.counted.setdefault("test", []).extend(index_of(image.numpy()) for image in images)
        self.log("test_rows", float(len(images)), reduce_fx="sum", sync_dist=True, batch_size=len(images))

    def predict_step(self, batch, batch_idx):
        images, labels, ids, repeated = batch
        self.counted.setdefault("predict", []).extend(ids[~repeated].tolist())
        self.repeats["predict"] = self.repeats.get("predict", 0) + int(repeated.sum())
        return self.net(images.float().div(255)).argmax(1)[torch.from_numpy(~repeated)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("shards", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    devices = int(os.environ.get("WORLD_SIZE", "1"))
    trainer = pl.Trainer(accelerator="cpu", devices=devices, strategy="ddp" if devices > 1 else "auto", max_epochs=1,
                         logger=False, enable_progress_bar=False, enable_model_summary=False,
                         enable_checkpointing=False, default_root_dir=args.out)  # the default sanity check: 2 steps
    model, data = EvalModel(), EvalData(args.shards)
    trainer.fit(model, datamodule=data)
    fit_metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    validated = trainer.validate(model, datamodule=data, verbose=False)
    tested = trainer.test(model, datamodule=data, verbose=False)
    predicted = trainer.predict(model, datamodule=data)
    record = {"counted": model.counted, "repeats": model.repeats, "sanity_batches": model.sanity_batches,
              "trained_steps": len(model.seen), "fit_metrics": fit_metrics, "validate": validated, "test": tested,
              "predictions": sum(len(p) for p in predicted)}
    (args.out / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main()
