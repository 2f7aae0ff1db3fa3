"""Configuration of ``dataio.TextLoader``: one frozen, keyword-only dataclass."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path
from typing import Any, Literal

from dataio.formats.errors import ConfigError
from dataio.pipeline.device_check import checked_device
from dataio.pipeline.error_policy import ErrorPolicy
from dataio.remote.remote_options import (DEFAULT_CACHE_LIMIT, DEFAULT_TIMEOUT, check_remote_options,
                                            held_options)
from dataio.sampling import partition
from dataio.mixtures.mixture_options import checked_weights
from dataio.sampling.world import check_rank_args


@dataclass(frozen=True, kw_only=True)
class TextLoaderConfig:
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
    shuffle: bool = True
    shuffle_window: int = partition.DEFAULT_WINDOW  # samples shuffled together after the shard shuffle
    seed: int = 0
    drop_last: bool = False
    even_batches: bool = True  # False: the batches that do not divide among the ranks are not padded by repeats
    world_size: int | None = None  # None: from torch.distributed when initialised, else 1
    rank: int | None = None
    device: str = "cpu"
    pin_memory: bool = False
    batch_transform: Callable[[dict], dict] | None = None  # per batch dict, on the device after the copy
    verify_checksums: bool = False
    on_error: ErrorPolicy = ErrorPolicy.RAISE  # a bad sample: raise, or drop it (skip, warn) and count it in stats
    max_errors: int | None = None  # under skip/warn: more bad samples than this raise TooManyErrors
    # Remote shards (an fsspec URL as source): token shards are memory-mapped, so each is copied whole into
    # cache_dir (a temporary folder removed at close when None), checked against the manifest's sha256.
    storage_options: Mapping[str, Any] | None = None  # fsspec backend options, per URL prefix; never printed
    cache_dir: str | Path | None = None
    retries: int = 4  # retries of a transient failure (reset, timeout, 5xx), with exponential backoff
    retry_backoff: float = 0.2  # seconds before the first retry; doubled at each
    remote_timeout: float = DEFAULT_TIMEOUT  # seconds a request may wait to connect or for its next bytes
    profile: bool = False  # stage ranges as torch.profiler record_function (and NVTX on CUDA) ranges
    # Mixtures (the source a dict of name -> folder or URL; dataio.text.mixture_plans):
    weights: Any = None  # {name: weight}, or [(position, {name: weight}), ...] (a schedule), or a WeightSchedule
    epoch_length: int | None = None  # units (samples; batches in bucket/budget) per epoch; default: one pass of all
    epoch_until: str | None = None  # or: the epoch ends when this source (or "all") finishes a pass

    def __post_init__(self) -> None:
        object.__setattr__(self, "device", checked_device(self.device))
        if self.batch_transform is not None and not callable(self.batch_transform):
            raise ConfigError(f"{{0}} must be a callable, got {type(self.batch_transform).__name__}",
                              "batch_transform")
        if self.mode not in ("fixed", "bucket", "budget", "pack"):
            raise ValueError(f"mode must be fixed|bucket|budget|pack, got {self.mode!r}")
        for name in ("batch_size", "max_tokens", "block_size", "pad_multiple", "window", "shuffle_window"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if isinstance(self.ignore_index, bool) or not isinstance(self.ignore_index, Integral) or self.ignore_index >= 0:
            raise ConfigError(f"{{0}} must be a negative int (a token id would take real labels out of the loss), "
                              f"got {self.ignore_index!r}", "ignore_index")
        object.__setattr__(self, "on_error", ErrorPolicy(self.on_error))
        if self.max_errors is not None and self.max_errors < 0:
            raise ValueError(f"max_errors must be >= 0, got {self.max_errors}")
        check_rank_args(self.world_size, self.rank)
        object.__setattr__(self, "weights", checked_weights(self.weights, self.epoch_length, self.epoch_until))
        check_remote_options(storage_options=self.storage_options, cache_dir=self.cache_dir,
                             cache_limit=DEFAULT_CACHE_LIMIT, retries=self.retries, retry_backoff=self.retry_backoff,
                             remote_timeout=self.remote_timeout)
        object.__setattr__(self, "storage_options", held_options(self.storage_options))

    def share_settings(self) -> dict[str, Any]:
        """The options that decide each rank's batches, which every rank must agree on (``rank_agreement``)."""
        return {"shuffle": self.shuffle, "shuffle_window": self.shuffle_window, "mode": self.mode,
                "batch_size": self.batch_size, "max_tokens": self.max_tokens, "block_size": self.block_size,
                "pad_multiple": self.pad_multiple, "window": self.window}
