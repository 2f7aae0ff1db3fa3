"""dataio: data pipelines that keep GPUs fed.

Heavy modules (torch, DALI) are imported on first use, so the converters and
the CLI start fast.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "ImageLoader": "dataio.image_loader",
    "ImageLoaderConfig": "dataio.image_loader_config",
    "TextLoader": "dataio.text_loader",
    "TextLoaderConfig": "dataio.text_loader",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dataio' has no attribute {name!r}")


__all__ = ["ImageLoader", "ImageLoaderConfig", "TextLoader", "TextLoaderConfig", "__version__"]
