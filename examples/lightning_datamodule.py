"""PyTorch Lightning: a ``LightningDataModule`` whose train, val and test loaders are dataio loaders.

``fit`` trains and validates, checkpointing every ``--checkpoint-every`` steps; ``test`` then
evaluates the weights. A run stopped mid-epoch (a lost node, a job time limit: ``--max-steps``
here) continues with ``--resume last``: Lightning saves ``loader.state_dict()`` in its checkpoints
and restores it, so the resumed epoch reads only the batches the stopped run had not reached.

dataio's loaders are not ``torch.utils.data.DataLoader``s: Lightning does not wrap them with a
``DistributedSampler``; each loader takes rank and world size from the process group that
Lightning sets up (so they are built in the ``*_dataloader`` hooks, not in ``__init__``).
Validation reads ``loader.with_ids()``, whose ``repeated`` flags mark the samples a rank repeats
to keep step counts equal under DDP, so each validation image is counted once.

    dataio convert images imagenet/train shards/train
    dataio convert images imagenet/val shards/val
    python examples/lightning_datamodule.py shards --epochs 90 --devices 8 --out runs/lit
    python examples/lightning_datamodule.py shards --epochs 90 --devices 8 --out runs/lit --resume last

A quick CPU run: ``--epochs 2 --image-size 64 --batch-size 4 --workers 1 --max-steps 2``, then
``--resume last`` without ``--max-steps``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from torch import nn

import dataio

# Lightning's messages (devices found, checkpoint restored, why fit stopped) go to stdout with the script's own
# lines, as a job log reads them; its warnings and errors stay on stderr.
for name in ("lightning", "lightning.pytorch"):
    for handler in logging.getLogger(name).handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr:
            handler.setStream(sys.stdout)

# Lightning advises more DataLoader worker processes for any loader with num_workers < cores; dataio decodes
# in threads of the training process (num_workers= is its thread count), so the advice does not apply.
warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
# Lightning 2.6's own pytree code on torch >= 2.10 (nothing this script does): torch deprecated LeafSpec.
warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated", category=FutureWarning)


class ImageNetShards(pl.LightningDataModule):
    """Train, val and test splits as dataio loaders; closed when Lightning tears the stage down."""

    def __init__(self, train: Path, val: Path, test: Path, *, batch_size: int, image_size: int, workers: int) -> None:
        super().__init__()
        self.splits = {"train": train, "val": val, "test": test}
        self.options = dict(batch_size=batch_size, image_size=image_size, num_workers=workers, normalize=True)
        self.open: list = []

    def _loader(self, split: str, train: bool):
        loader = dataio.DataLoader(self.splits[split], shuffle=train, train=train, **self.options)
        self.open.append(loader)
        return loader

    @property
    def classes(self) -> tuple[str, ...]:
        dataset = dataio.ShardDataset(self.splits["train"])  # the manifest's class names; no image is read
        dataset.close()
        return dataset.classes

    def train_dataloader(self):
        return self._loader("train", train=True)  # RandomResizedCrop + flip, reshuffled every epoch

    def val_dataloader(self):
        return self._loader("val", train=False).with_ids()  # resize + centre crop; batches carry `repeated`

    def test_dataloader(self):
        return self._loader("test", train=False)  # (images, labels), as from torch's DataLoader

    def teardown(self, stage: str) -> None:
        for loader in self.open:
            loader.close()
        self.open.clear()


class Classifier(pl.LightningModule):
    def __init__(self, num_classes: int, width: int = 32, lr: float = 0.1) -> None:
        super().__init__()
        self.save_hyperparameters()
        layers, channels = [], 3
        for out in (width, width * 2, width * 4):
            layers += [nn.Conv2d(channels, out, 3, 2, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU()]
            channels = out
        self.net = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, num_classes))
        self.trained = {}  # epoch -> images trained on in this process (to show where a resumed run starts)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images)

    def training_step(self, batch, batch_idx):
        images, labels = batch
        loss = F.cross_entropy(self(images), labels)
        self.trained[self.current_epoch] = self.trained.get(self.current_epoch, 0) + len(labels)
        self.log("train_loss", loss, prog_bar=True, batch_size=len(labels))
        return loss

    def validation_step(self, batch, batch_idx):
        images, labels, ids, repeated = batch
        keep = torch.from_numpy(~repeated).to(labels.device)  # padding repeats: counted on their own rank only
        right = (self(images).argmax(1) == labels)[keep]
        self.log("val_right", right.sum().float(), reduce_fx="sum", sync_dist=True, batch_size=len(labels))
        self.log("val_images", keep.sum().float(), reduce_fx="sum", sync_dist=True, batch_size=len(labels))

    def on_validation_epoch_end(self) -> None:
        metrics = self.trainer.callback_metrics
        if "val_images" in metrics and not self.trainer.sanity_checking:
            self.log("val_acc", metrics["val_right"] / metrics["val_images"], sync_dist=False)

    def test_step(self, batch, batch_idx):
        images, labels = batch
        right = (self(images).argmax(1) == labels).float()
        self.log("test_acc", right.mean(), sync_dist=True, batch_size=len(labels))

    def on_train_epoch_end(self) -> None:
        print(f"epoch {self.current_epoch}: trained on {self.trained.get(self.current_epoch, 0)} images "
              f"(global step {self.global_step})")

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="folder holding the train/ and val/ shard folders")
    parser.add_argument("--test", type=Path, help="test shards (default: DATA/val; ImageNet's test labels are "
                                                  "withheld)")
    parser.add_argument("--out", type=Path, default=Path("runs/lightning"))
    parser.add_argument("--epochs", type=int, default=90)
    parser.add_argument("--max-steps", type=int, default=-1, help="stop after this many steps in all")
    parser.add_argument("--batch-size", type=int, default=256, help="per device")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--workers", type=int, default=8, help="decode threads per process")
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--accelerator", default="auto")
    parser.add_argument("--checkpoint-every", type=int, default=1000, help="steps between checkpoints")
    parser.add_argument("--resume", help="a checkpoint path, or 'last'")
    args = parser.parse_args()

    if args.resume:  # a resumed run writes into its own checkpoint folder: expected, not a mistake
        warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
    data = ImageNetShards(args.data / "train", args.data / "val", args.test or args.data / "val",
                          batch_size=args.batch_size, image_size=args.image_size, workers=args.workers)
    model = Classifier(len(data.classes), args.width)
    checkpoints = ModelCheckpoint(dirpath=args.out / "checkpoints", every_n_train_steps=args.checkpoint_every,
                                  save_last=True)
    trainer = pl.Trainer(accelerator=args.accelerator, devices=args.devices, max_epochs=args.epochs,
                         max_steps=args.max_steps, callbacks=[checkpoints], logger=CSVLogger(args.out),
                         log_every_n_steps=1, enable_progress_bar=False, enable_model_summary=False,
                         default_root_dir=args.out)
    trainer.fit(model, datamodule=data, ckpt_path=args.resume)
    metrics = {k: round(float(v), 4) for k, v in trainer.callback_metrics.items()}
    print(f"fit stopped at step {trainer.global_step}: {metrics}")
    if args.max_steps < 0 or trainer.global_step < args.max_steps:  # the run went to its last epoch: test it
        (results,) = trainer.test(model, datamodule=data, verbose=False)
        print(f"test: {results}")


if __name__ == "__main__":
    main()
