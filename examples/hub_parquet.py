"""From the Hugging Face Hub's Parquet files to training: convert once to Arrow shards, read them with dataio and HF.

ImageNet-1k (and most image data sets) ship on the Hub as Parquet files whose ``image`` column is a
struct of JPEG ``bytes`` and ``path`` and whose ``label`` is an integer with ``ClassLabel`` names in
the schema metadata. This script:

1. converts them with ``dataio convert images SRC OUT --format arrow`` (image bytes streamed one
   record batch at a time, so memory does not grow with the split; every image decoded and checked,
   bad rows listed in ``OUT/rejected.jsonl``; rerun, it resumes after its last finished shard);
2. reads the shards back with Hugging Face ``datasets`` (``Dataset.from_file``), as any tool of that
   ecosystem would: the same rows, the class names as a ``ClassLabel``, images decoded by ``datasets``;
3. trains a small classifier on them with ``dataio.ImageLoader``, which reads the same files (each
   image at a fixed offset: one ``pread`` and a decode of the crop only), and evaluates on ``--val``.

    huggingface-cli download ILSVRC/imagenet-1k --repo-type dataset --include 'data/*' --local-dir imagenet-1k
    python examples/hub_parquet.py 'imagenet-1k/data/train-*.parquet' shards/train \\
        --val 'imagenet-1k/data/validation-*.parquet' --val-out shards/val --epochs 16

A quick run: ``--steps 3 --image-size 64 --batch-size 4 --no-progress``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import dataio


def convert(src: str, out: Path, progress: bool) -> None:
    """``dataio convert images SRC OUT --format arrow``; a finished OUT is kept as it is."""
    if (out / "manifest.json").is_file():
        print(f"{out}: already converted")
        return
    command = [sys.executable, "-m", "dataio", "convert", "images", src, str(out), "--format", "arrow"]
    subprocess.run(command + ([] if progress else ["--no-progress"]), check=True)


def read_with_datasets(out: Path) -> None:
    """The shards as one Hugging Face ``Dataset``, checked against dataio's own view of them."""
    import datasets  # only here: a heavy import, and only this check needs it

    manifest = json.loads((out / "manifest.json").read_text())
    hf = datasets.concatenate_datasets([datasets.Dataset.from_file(str(out / shard["file"]))
                                        for shard in manifest["shards"]])
    first = hf[0]  # decoded by datasets: a PIL image and its label
    shards = dataio.ShardDataset(out)
    image, label = shards[0]  # decoded by dataio: a uint8 (3, H, W) tensor
    same_labels = hf["label"] == shards.targets
    same_image = first["image"].size == (image.shape[2], image.shape[1]) and first["label"] == label
    print(f"datasets: {len(hf)} rows, features {sorted(hf.features)}, classes {hf.features['label'].names[:3]}..., "
          f"first image {first['image'].size[0]}x{first['image'].size[1]}; labels as dataio's: {same_labels}, "
          f"first image as dataio's: {same_image}")
    shards.close()
    if not (same_labels and same_image):
        raise SystemExit(f"{out}: datasets and dataio disagree on the shards")


def small_cnn(num_classes: int, width: int) -> nn.Module:
    layers, channels = [], 3
    for out in (width, width * 2, width * 4):
        layers += [nn.Conv2d(channels, out, 3, 2, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU()]
        channels = out
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, num_classes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", help="Parquet files of the Hub's image layout: a file, a quoted glob or a folder")
    parser.add_argument("out", type=Path, help="the Arrow shard folder to write")
    parser.add_argument("--val", help="the validation split's Parquet files")
    parser.add_argument("--val-out", type=Path, help="where to convert --val (default: OUT-val)")
    parser.add_argument("--epochs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=0, help="stop after this many steps in all (0: all epochs)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--workers", type=int, default=None, help="decode threads (default: one per core)")
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--no-progress", action="store_true", help="no progress bars while converting")
    args = parser.parse_args()

    convert(args.src, args.out, not args.no_progress)
    read_with_datasets(args.out)
    val_out = None
    if args.val:
        val_out = args.val_out or args.out.with_name(args.out.name + "-val")
        convert(args.val, val_out, not args.no_progress)

    device = "cuda" if torch.cuda.is_available() else "cpu"
    train = dataio.ImageLoader(args.out, batch_size=args.batch_size, image_size=args.image_size, train=True,
                               normalize=True, num_workers=args.workers, device=device, seed=0)
    model = small_cnn(len(train.classes), args.width).to(device, memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-5)
    step = 0
    for epoch in range(args.epochs):
        train.set_epoch(epoch)
        model.train()
        start, seen = time.perf_counter(), 0
        for images, labels in train:  # float32 NCHW (channels_last), normalised; int64 labels
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step, seen = step + 1, seen + len(labels)
            if step == args.steps:
                break
        print(f"epoch {epoch}: {step} steps, loss={loss.item():.4f}, {seen / (time.perf_counter() - start):.0f} img/s")
        if step == args.steps:
            break
    train.close()

    if val_out is not None:
        model.eval()
        right = total = 0
        with dataio.ImageLoader(val_out, batch_size=args.batch_size, image_size=args.image_size, train=False,
                                normalize=True, num_workers=args.workers, device=device) as val, torch.no_grad():
            for images, labels in val:
                right += int((model(images).argmax(1) == labels).sum())
                total += len(labels)
        print(f"val: {right}/{total} right ({right / total:.3f})")


if __name__ == "__main__":
    main()
