"""The options a loader takes for remote shards (object storage, HTTP), checked in one place.

Both loader configs carry ``storage_options`` (passed to the fsspec backend;
never printed), ``cache_dir`` / ``cache_limit`` (an optional bounded local
cache) and ``retries`` / ``retry_backoff`` (transient failures are retried
``retries`` times, sleeping ``retry_backoff * 2**k`` seconds between).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dataio.formats.errors import ConfigError
from dataio.formats.remote.storage import RetryPolicy

DEFAULT_CACHE_LIMIT = 64 << 30  # bytes


def check_remote_options(*, storage_options: Any, cache_dir: Any, cache_limit: int, retries: int,
                         retry_backoff: float) -> None:
    """Raise ConfigError naming the first bad option."""
    if storage_options is not None and not isinstance(storage_options, dict):
        raise ConfigError("{0} must be a dict of backend options, got %s" % type(storage_options).__name__,
                          "storage_options")
    if cache_dir is not None and not isinstance(cache_dir, (str, Path)):
        raise ConfigError("{0} must be a folder path, got %s" % type(cache_dir).__name__, "cache_dir")
    if not isinstance(cache_limit, int) or cache_limit < 1:
        raise ConfigError(f"{{0}} must be a positive number of bytes, got {cache_limit!r}", "cache_limit")
    if not isinstance(retries, int) or retries < 0:
        raise ConfigError(f"{{0}} must be >= 0, got {retries!r}", "retries")
    if not retry_backoff >= 0:
        raise ConfigError(f"{{0}} must be >= 0 seconds, got {retry_backoff!r}", "retry_backoff")


def retry_policy(retries: int, retry_backoff: float) -> RetryPolicy:
    """``retries`` retries after the first attempt, with exponential backoff."""
    return RetryPolicy(attempts=retries + 1, backoff=retry_backoff)
