"""Training from shards on S3 (or any S3-compatible store: MinIO, Ceph, R2), with a local cache.

The loaders take an ``s3://`` URL where they take a folder. Credentials and the endpoint come
from the environment, read by botocore as for any AWS tool (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL`` for a store other than AWS, ``AWS_PROFILE``...),
so nothing secret is in the script or its arguments. Images are read as byte ranges listed in the
sample table (never a whole shard), in one batched request per batch, a few batches ahead; with
``--cache-dir`` the fetched ranges are kept on local disk (least recently used dropped past
``--cache-limit``), so the second epoch reads no network.

    export AWS_ENDPOINT_URL=https://minio.example.org AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=...
    dataio convert images imagenet/train s3://bucket/imagenet/train     # or --convert-from below
    dataio convert images imagenet/val s3://bucket/imagenet/val
    python examples/s3_shards.py s3://bucket/imagenet/train --val s3://bucket/imagenet/val \\
        --cache-dir /scratch/dataio-cache --epochs 16

``--convert-from FOLDER`` converts an ImageNet-layout folder into the train URL first (staged on
local disk, then uploaded with the manifest last; a rerun resumes the upload). A quick run:
``--epochs 2 --steps 2 --image-size 64 --batch-size 4``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import dataio


def small_cnn(num_classes: int, width: int) -> nn.Module:
    layers, channels = [], 3
    for out in (width, width * 2, width * 4):
        layers += [nn.Conv2d(channels, out, 3, 2, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU()]
        channels = out
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, num_classes))


def cached_bytes(folder: Path | None) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder and folder.is_dir() else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("train", help="train shards: s3://bucket/prefix (or any fsspec URL, or a folder)")
    parser.add_argument("--val", help="validation shards, likewise")
    parser.add_argument("--convert-from", type=Path, metavar="FOLDER",
                        help="first convert this ImageNet-layout folder into the train URL")
    parser.add_argument("--staging", type=Path, help="with --convert-from: the local folder it is converted in "
                                                     "before the upload (default: ~/.cache/dataio/staging/...)")
    parser.add_argument("--cache-dir", type=Path, help="keep fetched byte ranges here (default: no cache)")
    parser.add_argument("--cache-limit", type=float, default=200, help="GB of --cache-dir (default: 200)")
    parser.add_argument("--epochs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=0, help="steps per epoch (0: the whole epoch)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--workers", type=int, default=None, help="decode threads (default: one per core)")
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()

    if args.convert_from:
        # the CLI reads the same AWS_* variables; --no-progress: a job log has no terminal to draw bars on
        command = [sys.executable, "-m", "dataio", "convert", "images", str(args.convert_from), args.train,
                   "--no-progress"]
        subprocess.run(command + (["--staging", str(args.staging)] if args.staging else []), check=True)

    device = "cuda" if torch.cuda.is_available() else "cpu"
    remote = dict(cache_dir=args.cache_dir, cache_limit=int(args.cache_limit * 1e9), num_workers=args.workers,
                  image_size=args.image_size, batch_size=args.batch_size, normalize=True, device=device)
    train = dataio.ImageLoader(args.train, train=True, seed=0, **remote)  # the manifest and sample table are read
    print(f"{args.train}: {len(train.dataset)} images in {len(train.classes)} classes, {len(train)} batches")
    model = small_cnn(len(train.classes), args.width).to(device, memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-5)
    for epoch in range(args.epochs):
        train.set_epoch(epoch)
        model.train()
        start, seen = time.perf_counter(), 0
        for step, (images, labels) in enumerate(train):
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            seen += len(labels)
            if step + 1 == args.steps:
                break
        print(f"epoch {epoch}: loss={loss.item():.4f} {seen / (time.perf_counter() - start):.0f} img/s, "
              f"cache {cached_bytes(args.cache_dir) / 1e6:.1f} MB, {len(train.stats.errors)} bad samples")
    train.close()

    if args.val:
        model.eval()
        right = total = 0
        with dataio.ImageLoader(args.val, train=False, **remote) as val, torch.no_grad():
            for images, labels in val:
                right += int((model(images).argmax(1) == labels).sum())
                total += len(labels)
        print(f"val: {right}/{total} right ({right / total:.3f})")


if __name__ == "__main__":
    main()
