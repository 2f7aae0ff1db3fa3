"""Typed uses of dataio's public API, for mypy (tests/test_typed_api.py). Not run, only type-checked: mypy must
find no error, and no ``reveal_type`` below may show ``Any`` (an Any leaking from a public name)."""

from __future__ import annotations

import dataio
from dataio import DataLoader, ImageLoader, ImageLoaderConfig, ShardDataset, TextLoader, TextLoaderConfig, TokenDataset


def train_images(path: str) -> float:
    loader = ImageLoader(path, batch_size=8, image_size=64)
    reveal_type(loader)
    reveal_type(loader.config)
    total = 0.0
    for images, labels in loader:
        reveal_type(images)
        reveal_type(labels)
        total += float(images.float().mean().item()) + float(labels.sum().item())
    for batch in loader.batches():
        reveal_type(batch)
        reveal_type(batch.images)
    reveal_type(loader.state_dict())
    reveal_type(loader.dataset)
    reveal_type(loader.sampler)
    reveal_type(loader.stats)
    config: ImageLoaderConfig = loader.config
    side = config.image_size if isinstance(config.image_size, int) else config.image_size[0]  # (H, W): boxes
    return total + side + loader.batch_size + len(loader)


def read_text(path: str) -> int:
    loader = TextLoader(path, mode="budget", max_tokens=4096)
    reveal_type(loader)
    config: TextLoaderConfig = loader.config
    count = 0
    for batch in loader:
        reveal_type(batch)
        count += int(batch["input_ids"].numel())
    return count + config.max_tokens


def swap(path: str) -> int:
    loader = DataLoader(path, batch_size=4, shuffle=True)
    reveal_type(loader)
    reveal_type(dataio.__version__)
    return len(loader)


def datasets(path: str, text: str) -> int:
    images = ShardDataset(path)
    reveal_type(images)
    reveal_type(images[0])  # (image, label): what the transforms return, so their types are the transforms'
    tokens = TokenDataset(text)
    reveal_type(tokens[0])
    return len(images) + len(tokens)
