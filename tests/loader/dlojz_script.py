"""A training script in the shape of the DLO-JZ course's (Jean Zay); run by test_dlojz_script.py, not a test module.

It builds its data set and a ``DistributedSampler``, then the loader, calls
``train_loader.sampler.set_epoch(epoch)``, logs ``len(train_loader.dataset)``
and copies with ``non_blocking=True``: everything as written for
``torch.utils.data.DataLoader``. Only the loader line differs between
``--loader torch`` and ``--loader dataio``. Run alone, or under
``torchrun`` (gloo); it records, per rank, the colour index
(tests.conftest.colour_of) of every image it trained on, per epoch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from PIL import Image
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import Dataset, DistributedSampler

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for tests.conftest
import dataio  # noqa: E402
from tests.conftest import index_of  # noqa: E402

IMAGE_SIZE = 16


class JpegFolder(Dataset):
    """Stands in for ``torchvision.datasets.ImageFolder`` (+ Resize, PILToTensor): class folders of JPEGs."""

    def __init__(self, root: Path) -> None:
        self.classes = sorted(d.name for d in root.iterdir() if d.is_dir())
        self.samples = [(path, label) for label, name in enumerate(self.classes)
                        for path in sorted((root / name).iterdir())]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        with Image.open(path) as image:
            pixels = np.asarray(image.convert("RGB").resize((IMAGE_SIZE, IMAGE_SIZE)))
        return torch.from_numpy(pixels.copy()).permute(2, 0, 1), label


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=Path, required=True)
    parser.add_argument("--shards", type=Path, required=True)
    parser.add_argument("--loader", choices=["torch", "dataio"], required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4)
    args = parser.parse_args()

    distributed = "RANK" in os.environ  # under torchrun
    if distributed:
        dist.init_process_group("gloo")
    rank, size = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    device = torch.device("cpu")
    torch.manual_seed(0)

    train_dataset = JpegFolder(args.images)
    train_sampler = DistributedSampler(train_dataset, num_replicas=size, rank=rank, shuffle=True)
    # ---- the one line that differs -------------------------------------------------------------------------
    if args.loader == "dataio":
        train_loader = dataio.DataLoader(args.shards, batch_size=args.batch_size, shuffle=False, sampler=train_sampler,
                                         num_workers=2, persistent_workers=True, pin_memory=True, prefetch_factor=2,
                                         image_size=IMAGE_SIZE, normalize=False)  # uint8, as JpegFolder's
    else:
        train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size, shuffle=False,
                                                   sampler=train_sampler, num_workers=2, persistent_workers=True,
                                                   pin_memory=True, prefetch_factor=2)
    # ---------------------------------------------------------------------------------------------------------

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(8, len(train_dataset.classes))).to(device)
    if distributed:
        model = DistributedDataParallel(model)
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    seen: list[list[int]] = []
    log = []
    for epoch in range(args.epochs):
        train_loader.sampler.set_epoch(epoch)
        log.append({"epoch": epoch, "dataset": len(train_loader.dataset), "steps": len(train_loader)})
        seen.append([])
        for images, labels in train_loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            seen[-1] += [index_of(image.numpy()) for image in images]
            outputs = model(images.float().div(255))
            loss = criterion(outputs, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        log[-1]["loss"] = loss.item()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"rank{rank}.json").write_text(json.dumps({"seen": seen, "log": log, "world_size": size}))
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
