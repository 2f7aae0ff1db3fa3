"""ImageNet training with ``dataio.ShardDataset``, torch's ``DataLoader`` (worker processes) and transforms of your own.

When a script's per-sample augmentation is its own (here RandomResizedCrop, flip and colour
jitter written with plain torch ops on uint8 ``(3, H, W)`` tensors; a torchvision v2 pipeline
takes the same tensors), keep torch's ``DataLoader`` and its worker processes and swap only
the data set: ``ImageFolder(root, transform)`` becomes ``dataio.ShardDataset(shards, transform)``.
Each sample is read from the shards with one ``pread``, checked against its checksum and
decoded by libjpeg-turbo in the worker; no directory of a million files is listed or opened.
The data set pickles in a few hundred bytes, so workers start fast (fork or spawn).

The rest is an ordinary training script: ``DistributedSampler`` with ``set_epoch`` under
torchrun, validation every epoch, a checkpoint per epoch and ``--resume``.

    dataio convert images imagenet/train shards/train
    dataio convert images imagenet/val shards/val
    python examples/shard_dataset_transforms.py shards --epochs 90 --batch-size 256 --workers 8
    torchrun --nproc_per_node 8 examples/shard_dataset_transforms.py shards --resume checkpoint.pt

A quick CPU run: ``--epochs 1 --image-size 64 --batch-size 4 --workers 2 --steps 2``.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler

import dataio

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1) * 255
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1) * 255


def resize(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Antialiased bilinear resize of a uint8 (3, H, W) tensor (torch resizes uint8 directly, no float copy)."""
    return F.interpolate(image[None], size=size, mode="bilinear", antialias=True)[0]


class RandomResizedCrop:
    """torchvision's RandomResizedCrop: a box of ``scale`` of the area and ``ratio`` aspect, resized to ``size``."""

    def __init__(self, size: int, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)) -> None:
        self.size, self.scale, self.log_ratio = size, scale, (math.log(ratio[0]), math.log(ratio[1]))

    def box(self, height: int, width: int) -> tuple[int, int, int, int]:
        area = height * width
        for _ in range(10):
            target = area * torch.empty(1).uniform_(*self.scale).item()
            aspect = math.exp(torch.empty(1).uniform_(*self.log_ratio).item())
            w, h = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
            if 0 < w <= width and 0 < h <= height:
                top = torch.randint(0, height - h + 1, (1,)).item()
                left = torch.randint(0, width - w + 1, (1,)).item()
                return top, left, h, w
        side = min(height, width)  # fallback: the central square
        return (height - side) // 2, (width - side) // 2, side, side

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        top, left, h, w = self.box(*image.shape[1:])
        return resize(image[:, top:top + h, left:left + w], (self.size, self.size))  # crop first: a view


class RandomHorizontalFlip:
    def __init__(self, p: float = 0.5) -> None:
        self.p = p

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        return image.flip(-1) if torch.rand(1).item() < self.p else image


class ColorJitter:
    """Brightness, contrast and saturation factors drawn in ``[1 - x, 1 + x]``, applied in that order."""

    def __init__(self, brightness: float = 0.4, contrast: float = 0.4, saturation: float = 0.4) -> None:
        self.amounts = (brightness, contrast, saturation)

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        b, c, s = (1 + torch.empty(1).uniform_(-x, x).item() for x in self.amounts)
        x = image.float() * b
        gray = (0.299 * x[0] + 0.587 * x[1] + 0.114 * x[2]).clamp(0, 255)
        x = (x - gray.mean()) * c + gray.mean()
        gray = 0.299 * x[0] + 0.587 * x[1] + 0.114 * x[2]
        x = (x - gray) * s + gray
        return x.clamp(0, 255).round().to(torch.uint8)


class CenterCrop:
    """Resize the shorter side to ``size / crop_ratio``, keep the central ``size`` square (cropped first)."""

    def __init__(self, size: int, crop_ratio: float = 0.875) -> None:
        self.size, self.crop_ratio = size, crop_ratio

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        height, width = image.shape[1:]
        side = max(1, round(min(height, width) * self.crop_ratio))
        top, left = (height - side) // 2, (width - side) // 2
        return resize(image[:, top:top + side, left:left + side], (self.size, self.size))


class Normalize:
    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        return (image.float() - MEAN) / STD


class Compose:
    def __init__(self, *steps) -> None:
        self.steps = steps

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        for step in self.steps:
            image = step(image)
        return image


def small_cnn(num_classes: int, width: int = 32) -> nn.Module:
    """Three strided conv blocks and a linear head: enough to see the loss fall on a CPU."""
    layers, channels = [], 3
    for out in (width, width * 2, width * 4):
        layers += [nn.Conv2d(channels, out, 3, 2, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU()]
        channels = out
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, num_classes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="folder holding the train/ and val/ shard folders")
    parser.add_argument("--epochs", type=int, default=90)
    parser.add_argument("--steps", type=int, default=0, help="stop each epoch after this many steps (0: all)")
    parser.add_argument("--batch-size", type=int, default=256, help="per process")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--workers", type=int, default=8, help="DataLoader worker processes")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--width", type=int, default=32, help="channels of the first conv")
    parser.add_argument("--checkpoint", type=Path, default=Path("checkpoint.pt"))
    parser.add_argument("--resume", type=Path, help="a checkpoint to continue from")
    args = parser.parse_args()

    distributed = "RANK" in os.environ  # under torchrun
    if distributed:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank = dist.get_rank() if distributed else 0
    device = torch.device(f"cuda:{os.environ.get('LOCAL_RANK', 0)}" if torch.cuda.is_available() else "cpu")

    train_transform = Compose(RandomResizedCrop(args.image_size), RandomHorizontalFlip(), ColorJitter(), Normalize())
    val_transform = Compose(CenterCrop(args.image_size), Normalize())
    train_dataset = dataio.ShardDataset(args.data / "train", transform=train_transform)
    val_dataset = dataio.ShardDataset(args.data / "val", transform=val_transform)
    train_sampler = DistributedSampler(train_dataset) if distributed else None
    val_sampler = DistributedSampler(val_dataset, shuffle=False) if distributed else None
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, shuffle=train_sampler is None,
                              sampler=train_sampler, num_workers=args.workers, persistent_workers=args.workers > 0,
                              pin_memory=device.type == "cuda", drop_last=True)
    val_loader = DataLoader(val_dataset, batch_size=args.batch_size, sampler=val_sampler, num_workers=args.workers,
                            persistent_workers=args.workers > 0, pin_memory=device.type == "cuda")

    model = small_cnn(len(train_dataset.classes), args.width).to(device)
    if distributed:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-5)
    start_epoch = 0
    if args.resume:
        checkpoint = torch.load(args.resume, map_location=device, weights_only=True)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        start_epoch = checkpoint["epoch"]
        print(f"resumed from {args.resume} at epoch {start_epoch}")

    for epoch in range(start_epoch, args.epochs):
        if train_sampler is not None:
            train_sampler.set_epoch(epoch)
        model.train()
        start, seen = time.perf_counter(), 0
        for step, (images, labels) in enumerate(train_loader):
            if args.steps and step == args.steps:
                break
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            if step == 0 and epoch == start_epoch and rank == 0:
                print(f"train batch {tuple(images.shape)} {images.dtype} mean={images.mean():.3f} "
                      f"std={images.std():.3f}")
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            seen += len(images)
        rate = seen / (time.perf_counter() - start)
        right, total = evaluate(model, val_loader, device, distributed)
        if rank == 0:
            print(f"epoch {epoch}: loss={loss.item():.4f} {rate:.0f} img/s val_acc={right / total:.3f} "
                  f"({total} images)")
            torch.save({"epoch": epoch + 1, "model": model.state_dict(), "optimizer": optimizer.state_dict()},
                       args.checkpoint)
    if distributed:
        dist.destroy_process_group()


def evaluate(model: nn.Module, loader: DataLoader, device: torch.device, distributed: bool) -> tuple[int, int]:
    """Correct predictions and images over all ranks (DistributedSampler pads a rank's share by repetition)."""
    model.eval()
    counts = torch.zeros(2, dtype=torch.int64, device=device)
    with torch.no_grad():
        for images, labels in loader:
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            counts += torch.stack([(model(images).argmax(1) == labels).sum(), torch.tensor(len(labels), device=device)])
    if distributed:
        dist.all_reduce(counts)
    return int(counts[0]), int(counts[1])


if __name__ == "__main__":
    main()
