"""PyTorch Lightning fits on image-text pairs from dataio.DataLoader (dict batches) and resumes mid-epoch from its
checkpoint."""

from __future__ import annotations

import warnings
from pathlib import Path

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

import dataio


class PairData(pl.LightningDataModule):
    def __init__(self, pairs: Path) -> None:
        super().__init__()
        self.pairs = pairs

    def train_dataloader(self):
        return dataio.DataLoader(self.pairs, batch_size=8, shuffle=True, num_workers=1, image_size=16, seed=1)


class TinyPairModel(pl.LightningModule):
    """Pictures and captions each to 8 features, a contrastive loss between them."""

    def __init__(self) -> None:
        super().__init__()
        self.image = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 8))
        self.text = torch.nn.EmbeddingBag(512, 8)
        self.seen: list[tuple[int, list[int]]] = []

    def training_step(self, batch, batch_idx):
        assert batch["image"].dtype == torch.float32 and batch["input_ids"].shape == batch["attention_mask"].shape
        self.seen.append((self.current_epoch, batch["sample_ids"].tolist()))
        images = torch.nn.functional.normalize(self.image(batch["image"]), dim=1)
        texts = torch.nn.functional.normalize(self.text(batch["input_ids"] * batch["attention_mask"]), dim=1)
        logits = images @ texts.T * 10
        target = torch.arange(len(logits))
        return (torch.nn.functional.cross_entropy(logits, target) + torch.nn.functional.cross_entropy(logits.T, target)) / 2

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def fit(pairs: Path, out: Path, *, stop_after: int = -1, resume: Path | None = None) -> list:
    callbacks = [ModelCheckpoint(dirpath=out, every_n_train_steps=stop_after, save_top_k=-1)] if stop_after > 0 else []
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_epochs=2, max_steps=stop_after, logger=False,
                         enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=bool(callbacks),
                         callbacks=callbacks, num_sanity_val_steps=0, default_root_dir=out)
    model = TinyPairModel()
    trainer.fit(model, datamodule=PairData(pairs), ckpt_path=resume)
    return model.seen


def test_lightning_fits_on_pair_dicts_and_resumes_mid_epoch(pair_tars, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice on workers and logging intervals
        full = fit(pair_tars, tmp_path / "full")
        assert len(full) == 10 and sorted(i for epoch, ids in full if epoch == 0 for i in ids) == list(range(40))
        first = fit(pair_tars, tmp_path / "cut", stop_after=3)
        assert first == full[:3]
        rest = fit(pair_tars, tmp_path / "rest", resume=tmp_path / "cut" / "epoch=0-step=3.ckpt")
    assert rest == full[3:]
