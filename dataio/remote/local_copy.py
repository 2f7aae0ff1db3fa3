"""Token shards where they can be memory-mapped: a local folder as it is, a URL's shards copied whole first.

Shared by ``TextLoader`` and ``TokenDataset``: the copy goes into ``cache_dir`` (one subfolder per data set,
kept and re-used; each file's sha256 checked against the manifest, ``dataio.formats.dataset.remote_copy``) or,
without one, a temporary folder the caller keeps and removes.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dataio.formats.dataset.manifest import open_dataset
from dataio.formats.dataset.remote_copy import copy_dataset
from dataio.formats.remote.storage import DEFAULT_TIMEOUT, RetryPolicy


def local_token_folder(source: str | Path, *, storage_options: Mapping[str, Any] | None, retry: RetryPolicy,
                       cache_dir: str | Path | None, timeout: float = DEFAULT_TIMEOUT
                       ) -> tuple[str | Path, tempfile.TemporaryDirectory | None, bool]:
    """``(folder, the temporary folder to remove later or None, whether every shard's sha256 was checked)``."""
    location, manifest = open_dataset(source, storage_options, retry, timeout)
    if not location.remote:
        return source, None, False
    temporary = None
    if cache_dir is not None:
        folder = Path(cache_dir) / f"{location.cache_key()}-{manifest.fingerprint()}"
    else:
        temporary = tempfile.TemporaryDirectory(prefix="dataio-text-")
        folder = Path(temporary.name)
    copy_dataset(location, manifest, folder, retry)
    return folder, temporary, True
