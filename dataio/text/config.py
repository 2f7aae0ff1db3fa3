"""Configuration of ``dataio.TextLoader``: one frozen, keyword-only dataclass."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral
from typing import Any, Literal

from dataio.formats.errors import ConfigError
from dataio.loader.loader_config import LoaderConfig


@dataclass(frozen=True, kw_only=True)
class TextLoaderConfig(LoaderConfig):
    """Every option of the text loader, validated on construction.

    ``batch_transform(batch) -> batch`` runs on each batch dict on ``device``,
    after the copy (the last step before the batch is yielded). ``ignore_index``
    is the label of positions without a next token (padding, each document's
    last token): pass the same to the loss (nanoGPT: -1).
    """

    mode: Literal["fixed", "bucket", "budget", "pack"] = "budget"
    batch_size: int = 32  # rows per batch (fixed, bucket, pack)
    max_tokens: int = 16384  # budget: rows x padded length per batch
    block_size: int = 1024  # pack: tokens per row
    pad_multiple: int = 8
    ignore_index: int = -100  # labels with no next token; cross_entropy's default (nanoGPT's: -1)
    window: int = 8192  # bucket/budget: samples sorted together
    batch_transform: Callable[[dict], dict] | None = None  # per batch dict, on the device after the copy
    # cache_dir (a temporary folder removed at close when None), checked against the manifest's sha256.

    def __post_init__(self) -> None:
        if self.shuffle is None:  # text batches are shuffled unless told not to
            object.__setattr__(self, "shuffle", True)
        super().__post_init__()
        if self.batch_transform is not None and not callable(self.batch_transform):
            raise ConfigError(f"{{0}} must be a callable, got {type(self.batch_transform).__name__}",
                              "batch_transform")
        if self.mode not in ("fixed", "bucket", "budget", "pack"):
            raise ValueError(f"mode must be fixed|bucket|budget|pack, got {self.mode!r}")
        for name in ("batch_size", "max_tokens", "block_size", "pad_multiple", "window"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if isinstance(self.ignore_index, bool) or not isinstance(self.ignore_index, Integral) or self.ignore_index >= 0:
            raise ConfigError(f"{{0}} must be a negative int (a token id would take real labels out of the loss), "
                              f"got {self.ignore_index!r}", "ignore_index")

    def share_settings(self) -> dict[str, Any]:
        """The options that decide each rank's batches, which every rank must agree on (``rank_agreement``)."""
        return {"shuffle": self.shuffle, "shuffle_window": self.shuffle_window, "mode": self.mode,
                "batch_size": self.batch_size, "max_tokens": self.max_tokens, "block_size": self.block_size,
                "pad_multiple": self.pad_multiple, "window": self.window}
