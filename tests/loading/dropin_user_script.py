"""A user's training script on ``dataio.DataLoader``, run by test_dropin_user.py as a subprocess; not a test module.

``python dropin_user_script.py SHARDS OUT``: a validation loader as a
torchvision script builds it (``shuffle=False``), a training one
(``shuffle=True``) with the script's own augmentation kept as ``transform=``
(per image, uint8 CHW) and ``batch_transform=`` (per batch, on the device), a
float model fed by both, and the ``dataio`` logger at info level on stdout.
Writes OUT/summary.json and the first validation batch of each pass as
OUT/val{0,1}.npy.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from pathlib import Path

import numpy as np
import torch

import dataio

IMAGE_SIZE = 64


class Brightness:
    """A ColorJitter-like brightness and contrast jitter written in torch ops (as a script's own transform)."""

    def __init__(self) -> None:
        self.threads: set[str] = set()

    def __call__(self, image: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        self.threads.add(threading.current_thread().name)
        factors = 0.6 + 0.8 * torch.rand(2, generator=generator)
        pixels = image.float()
        mean = pixels.mean()
        return ((pixels - mean) * factors[1] + mean * factors[0]).clamp_(0, 255).to(torch.uint8)


def add_noise(images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The script's per-batch step on the device: sees float normalised NCHW batches."""
    assert images.dtype == torch.float32 and images.shape[1] == 3, (images.dtype, images.shape)
    return images + 0.01 * torch.randn_like(images), labels


def main() -> None:
    shards, out = Path(sys.argv[1]), Path(sys.argv[2])
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(8, 2))
    summary: dict = {}

    val_loader = dataio.DataLoader(shards, batch_size=4, shuffle=False, num_workers=2, image_size=IMAGE_SIZE)
    for epoch in range(2):
        with torch.no_grad():
            for step, (images, labels) in enumerate(val_loader):
                model(images)  # a float model takes the batch as it comes
                if step == 0:
                    np.save(out / f"val{epoch}.npy", images.numpy())
                    summary["val"] = {"dtype": str(images.dtype), "shape": list(images.shape),
                                      "channels_last": images.is_contiguous(memory_format=torch.channels_last),
                                      "train": val_loader.config.train}

    jitter = Brightness()
    train_loader = dataio.DataLoader(shards, batch_size=4, shuffle=True, num_workers=2, image_size=IMAGE_SIZE,
                                     transform=jitter, batch_transform=add_noise)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(2):
        train_loader.set_epoch(epoch)
        for images, labels in train_loader:
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    summary["train"] = {"train": train_loader.config.train, "dtype": str(images.dtype),
                        "threads": sorted(jitter.threads), "loss": loss.item(),
                        "stages": sorted(train_loader.stats.stages.seconds(1))}

    uint8 = dataio.DataLoader(shards, batch_size=4, normalize=False, image_size=IMAGE_SIZE)
    summary["uint8"] = str(next(iter(uint8))[0].dtype)
    for loader in (val_loader, train_loader, uint8):
        loader.close()
    (out / "summary.json").write_text(json.dumps(summary))


if __name__ == "__main__":
    main()
