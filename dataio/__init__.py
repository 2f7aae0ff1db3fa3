"""dataio: data pipelines that keep GPUs fed.

Deliberately lazy: the loaders (and with them torch) are imported on first use,
so the converters and the CLI start fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and editors see: the real classes, not Any
    from dataio.dataloader import DataLoader
    from dataio.detection.loader import DetectionLoader
    from dataio.pairs.loader import PairLoader
    from dataio.views.loader import ViewsLoader
    from dataio.views.views_config import ViewsConfig
    from dataio.pairs.caption_config import CaptionConfig
    from dataio.pairs.tokenizer_identity import check_same_tokenizer
    from dataio.detection.detection_config import DetectionConfig
    from dataio.images.config import ImageLoaderConfig
    from dataio.images.loader import ImageLoader
    from dataio.images.shard_dataset import ShardDataset, ShardDatasetConfig
    from dataio.text.config import TextLoaderConfig
    from dataio.text.loader import TextLoader
    from dataio.text.token_dataset import TokenDataset, TokenDatasetConfig
    from dataio.formats.jpeg.cpu_tier import cpu_tier, tier_in_use, use_tier

__version__ = "0.1.0"

_LAZY = {
    "CaptionConfig": "dataio.pairs.caption_config",
    "DataLoader": "dataio.dataloader",
    "DetectionLoader": "dataio.detection.loader",
    "PairLoader": "dataio.pairs.loader",
    "DetectionConfig": "dataio.detection.detection_config",
    "ImageLoader": "dataio.images.loader",
    "ImageLoaderConfig": "dataio.images.config",
    "ShardDataset": "dataio.images.shard_dataset",
    "ShardDatasetConfig": "dataio.images.shard_dataset",
    "TextLoader": "dataio.text.loader",
    "TextLoaderConfig": "dataio.text.config",
    "TokenDataset": "dataio.text.token_dataset",
    "TokenDatasetConfig": "dataio.text.token_dataset",
    "ViewsConfig": "dataio.views.views_config",
    "ViewsLoader": "dataio.views.loader",
    "check_same_tokenizer": "dataio.pairs.tokenizer_identity",
    "cpu_tier": "dataio.formats.jpeg.cpu_tier",
    "tier_in_use": "dataio.formats.jpeg.cpu_tier",
    "use_tier": "dataio.formats.jpeg.cpu_tier",
}


def check_epoch(loader: Any) -> dict[str, Any]:
    """Check the loader's last pass against its plan on every rank (``loader.epoch_digest()``; a collective)."""
    return loader.epoch_digest()


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dataio' has no attribute {name!r}")


__all__ = ["CaptionConfig", "DataLoader", "DetectionConfig", "DetectionLoader", "ImageLoader", "ImageLoaderConfig",
           "PairLoader", "ShardDataset", "ShardDatasetConfig", "TextLoader", "TextLoaderConfig", "TokenDataset",
           "TokenDatasetConfig", "ViewsConfig", "ViewsLoader", "__version__", "check_epoch",
           "check_same_tokenizer", "cpu_tier", "tier_in_use", "use_tier"]
