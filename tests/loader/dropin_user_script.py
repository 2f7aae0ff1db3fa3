"""A user's training script on ``dataio.DataLoader``, run by test_dropin_user.py as a subprocess; not a test module.

``python dropin_user_script.py SHARDS OUT``: a validation loader as a
torchvision script builds it (``shuffle=False``), a training one
(``shuffle=True``) with the script's own augmentation kept as ``transform=``
(per image, uint8 CHW) and ``batch_transform=`` (per batch, on the device), a
float model fed by both, the CNN of PyTorch's 60-minute blitz (its ``x.view``
needs contiguous NCHW batches, as torch's DataLoader stacks them), and the
``dataio`` logger at info level on stdout.
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


class BlitzNet(torch.nn.Module):
    """The CNN of PyTorch's "Deep Learning with PyTorch: A 60 Minute Blitz", as written there (32 x 32 input)."""

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.conv1, self.pool, self.conv2 = nn.Conv2d(3, 6, 5), nn.MaxPool2d(2, 2), nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(16 * 5 * 5, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


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
                                      "contiguous": images.is_contiguous(),
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

    blitz, net = dataio.DataLoader(shards, batch_size=4, shuffle=True, image_size=32), BlitzNet()
    for images, labels in blitz:
        loss = torch.nn.functional.cross_entropy(net(images), labels)
        loss.backward()
    summary["blitz"] = loss.item()

    uint8 = dataio.DataLoader(shards, batch_size=4, normalize=False, image_size=IMAGE_SIZE)
    images = next(iter(uint8))[0]
    summary["uint8"], summary["uint8_contiguous"] = str(images.dtype), images.is_contiguous()
    for loader in (val_loader, train_loader, blitz, uint8):
        loader.close()
    (out / "summary.json").write_text(json.dumps(summary))


if __name__ == "__main__":
    main()
