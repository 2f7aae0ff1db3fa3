"""The options every loader shares, declared once with one default and one check (``ImageLoaderConfig`` and
``TextLoaderConfig`` extend it with their kind's).

Declared twice, they had drifted: ``shuffle`` was ``bool | None = None`` for
images and ``bool = True`` for text, ``max_errors`` said its value in one
message and not the other. A new kind of loader (``loader.sample_loader``)
starts from the same fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dataio.formats.errors import ConfigError
from dataio.mixtures.mixture_options import checked_weights
from dataio.pipeline.device_check import checked_device
from dataio.pipeline.error_policy import ErrorPolicy
from dataio.remote.remote_options import DEFAULT_CACHE_LIMIT, DEFAULT_TIMEOUT, check_remote_options, held_options
from dataio.sampling.partition import DEFAULT_WINDOW
from dataio.sampling.world import check_rank_args


@dataclass(frozen=True, kw_only=True)
class LoaderConfig:
    """The shared options: order, ranks, device, errors, remote reading, profiling, mixtures."""

    shuffle: bool | None = None  # None: the kind's default (images: shuffle when training; text: shuffle)
    seed: int = 0
    drop_last: bool = False  # DataLoader's: each rank's short last batch is dropped
    even_batches: bool = True  # False: the uneven tail is neither padded nor trimmed (ranks' counts differ: predict)
    world_size: int | None = None  # None: from torch.distributed when initialised, else 1
    rank: int | None = None
    # True: a share of the process group's (the faces' default); False: the whole set on this rank (an eval on rank
    # 0 alone); None: torch's DataLoader semantics (dataio.DataLoader's): shares only where a sampler or a framework
    # (Lightning's loops, Accelerate) asks for them, else the whole set (dataio.loader.share_request)
    shard: bool | None = True
    shuffle_window: int = DEFAULT_WINDOW  # samples shuffled together after the shard shuffle
    device: str = "cpu"
    pin_memory: bool = False
    on_error: ErrorPolicy = ErrorPolicy.RAISE  # a bad sample: raise, or drop it (skip, warn) and count it in stats
    max_errors: int | None = None  # under skip/warn: more bad samples than this raise TooManyErrors
    verify_checksums: bool = False  # each shard's sha256 against the manifest, when the loader is built
    # Remote shards (an fsspec URL as source; dataio.remote.remote_options):
    storage_options: Mapping[str, Any] | None = None  # fsspec backend options, per URL prefix; never printed
    cache_dir: str | Path | None = None
    retries: int = 4  # retries of a transient failure (reset, timeout, 5xx), with exponential backoff
    retry_backoff: float = 0.2  # seconds before the first retry; doubled at each
    remote_timeout: float = DEFAULT_TIMEOUT  # seconds a request may wait to connect or for its next bytes
    profile: bool = False  # stage ranges as torch.profiler record_function (and NVTX on CUDA) ranges
    # Mixtures (the source a dict of name -> folder or URL):
    weights: Any = None  # {name: weight}, or [(position, {name: weight}), ...] (a schedule), or a WeightSchedule
    epoch_length: int | None = None  # units per epoch (samples; text bucket/budget: batches); default one pass
    epoch_until: str | None = None  # or: the epoch ends when this source (or "all") finishes a pass

    def __post_init__(self) -> None:
        object.__setattr__(self, "on_error", ErrorPolicy(self.on_error))
        object.__setattr__(self, "device", checked_device(self.device))
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or not 0 <= self.seed < 2**64:
            raise ConfigError(f"{{0}} must be an int in 0..2**64-1 (the epochs' and draws' seed), got "
                              f"{self.seed!r:.30}", "seed")
        if self.max_errors is not None and self.max_errors < 0:
            raise ValueError(f"max_errors must be >= 0, got {self.max_errors}")
        check_rank_args(self.world_size, self.rank)
        if self.shard not in (True, False, None):
            raise ConfigError(f"{{0}} must be True, False or None, got {self.shard!r:.30}", "shard")
        if self.shard is False and self.world_size not in (None, 1):
            raise ConfigError(f"{{0}}=False reads the whole set on this rank; it excludes world_size={self.world_size} "
                              "(or a DistributedSampler): give one or the other", "shard")
        if self.shuffle_window < 1:
            raise ValueError(f"shuffle_window must be >= 1, got {self.shuffle_window}")
        check_remote_options(storage_options=self.storage_options, cache_dir=self.cache_dir,
                             cache_limit=getattr(self, "cache_limit", DEFAULT_CACHE_LIMIT), retries=self.retries,
                             retry_backoff=self.retry_backoff, remote_timeout=self.remote_timeout)
        object.__setattr__(self, "storage_options", held_options(self.storage_options))
        object.__setattr__(self, "weights", checked_weights(self.weights, self.epoch_length, self.epoch_until))

    @property
    def shuffles(self) -> bool:
        """Whether epochs are shuffled (``shuffle``; None: yes, unless a kind says otherwise)."""
        return self.shuffle is not False

    @property
    def drops_tail(self) -> bool:
        """Whether the samples that do not divide among the ranks are dropped rather than padded: ``drop_last``
        (every rank then reads only full batches of distinct samples)."""
        return self.drop_last
