"""The options a loader takes for remote shards (object storage, HTTP), checked in one place.

Both loader configs carry ``storage_options`` (passed to the fsspec backend,
per URL prefix when given so; held as ``StorageOptions``, whose ``repr`` never
shows a value: ``storage_options``), ``cache_dir`` / ``cache_limit`` (an optional bounded local
cache), ``retries`` / ``retry_backoff`` (transient failures are retried
``retries`` times, sleeping ``retry_backoff * 2**k`` seconds between) and
``remote_timeout`` (seconds a request may wait to connect or for its next
bytes before the attempt fails: a stalled store costs at most about
``(retries + 1) * remote_timeout`` plus the backoff, never a hang).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dataio.formats.errors import ConfigError
from dataio.formats.remote.storage import DEFAULT_TIMEOUT, RetryPolicy
from dataio.formats.remote.storage_options import StorageOptions

DEFAULT_CACHE_LIMIT = 64 << 30  # bytes


def check_remote_options(*, storage_options: Any, cache_dir: Any, cache_limit: int, retries: int,
                         retry_backoff: float, remote_timeout: float = DEFAULT_TIMEOUT) -> None:
    """Raise ConfigError naming the first bad option."""
    if storage_options is not None and not isinstance(storage_options, Mapping):
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
    if isinstance(remote_timeout, bool) or not isinstance(remote_timeout, (int, float)) or not (
            0 < remote_timeout and math.isfinite(remote_timeout)):
        raise ConfigError(f"{{0}} must be a positive number of seconds, got {remote_timeout!r}", "remote_timeout")


def held_options(storage_options: Mapping[str, Any] | None) -> StorageOptions | None:
    """``storage_options`` as a config holds them: ``StorageOptions`` (never printed), None for none; a config's
    ``__post_init__`` sets its field to this."""
    return StorageOptions.of(storage_options)


def retry_policy(retries: int, retry_backoff: float) -> RetryPolicy:
    """``retries`` retries after the first attempt, with exponential backoff."""
    return RetryPolicy(attempts=retries + 1, backoff=retry_backoff)
