"""``dataio convert ... s3://bucket/out``: convert into a local staging folder, then upload.

Shards are finished locally (the converter's own atomic writes and
journal), then each file is uploaded, and ``manifest.json`` LAST: a reader
never sees a remote manifest before every file it names is in place. The
staging folder is deterministic (``~/.cache/dataio/staging/<hash of the
URL>`` unless given), so a rerun after any interruption finds it: the local
conversion resumes as it does locally, and files already uploaded with the
right size are not sent again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from dataio.formats.errors import DataioError
from dataio.formats.dataset.manifest import MANIFEST_NAME, read_manifest
from dataio.formats.dataset.remote_copy import dataset_files
from dataio.formats.remote.storage import Location, RetryPolicy, describe, open_location, remote_errors

Summary = TypeVar("Summary")
REJECTED_NAMES = ("rejected.jsonl", "rejected.json")


def default_staging(url: str) -> Path:
    """Where the conversion of ``url`` is staged: stable across runs, so a rerun resumes."""
    location = Location(None, None, url)
    return Path.home() / ".cache" / "dataio" / "staging" / location.cache_key()


def convert_to_remote(url: str, convert: Callable[[Path], Summary], *, storage_options: Mapping[str, Any] | None = None,
                      staging: Path | None = None, retry: RetryPolicy | None = None) -> tuple[Summary | None, int]:
    """Run ``convert(staging)`` (skipped when the staging folder is already complete), then upload.

    Returns the converter's summary (None when it was already complete) and
    the number of files uploaded.
    """
    location = open_location(url, storage_options)
    staging = staging or default_staging(url)
    summary = None if (staging / MANIFEST_NAME).is_file() else convert(staging)
    return summary, upload_dataset(staging, location, retry or RetryPolicy())


def upload_dataset(folder: Path, location: Location, retry: RetryPolicy) -> int:
    """Upload the finished data set in ``folder`` to ``location``, the manifest last; returns files sent."""
    _, manifest = read_manifest(folder)
    names = dataset_files(manifest) + [n for n in REJECTED_NAMES if (folder / n).is_file()]
    sent = 0
    try:
        location.fs.makedirs(location.root, exist_ok=True)
        for name in names + [MANIFEST_NAME]:
            local, remote = folder / name, location.path(name)
            if name != MANIFEST_NAME and _uploaded(location, remote, local.stat().st_size, retry):
                continue
            retry.call(lambda local=local, remote=remote: location.fs.put_file(str(local), remote))
            sent += 1
    except remote_errors() as e:
        raise DataioError(f"upload to {location.display()} failed ({describe(e)}); "
                          "run the same command again to resume") from None
    return sent


def _uploaded(location: Location, remote: str, size: int, retry: RetryPolicy) -> bool:
    """Whether ``remote`` is already there with ``size`` bytes (a rerun after an interrupted upload)."""
    try:
        return retry.call(lambda: location.fs.size(remote)) == size
    except FileNotFoundError:
        return False
