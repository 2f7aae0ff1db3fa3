"""One image shard folder (or URL) opened for reading: its manifest, sample table, shard files and faulty rows.

``ImageLoader`` opens its source with ``open_image_source``; a mixture opens one
per source and lays them end to end (``dataio.images.image_mixture``). Every
check that names a bad source (not image shards, a table that disagrees with
the manifest, an empty or short class list, a missing or truncated shard)
happens here, when the loader is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataio.formats.dataset.class_list import class_list_problem
from dataio.formats.dataset.manifest import MANIFEST_NAME, Manifest, ManifestError, open_dataset
from dataio.formats.dataset.sample_table import LABEL_FIELD, SampleTable, read_sample_table, table_faults
from dataio.formats.kinds import kind_of
from dataio.formats.errors import ShardError
from dataio.formats.remote.storage import Location, describe, remote_errors
from dataio.images.config import ImageLoaderConfig
from dataio.remote.remote_shard_files import RemoteShardFiles
from dataio.images.shard_files import ShardFiles
from dataio.remote.range_cache import RangeCache
from dataio.remote.remote_options import retry_policy


@dataclass
class ImageSource:
    """An opened image shard folder; ``folder`` is what messages call it (a path, or the redacted URL)."""

    location: Location
    manifest: Manifest
    table: SampleTable
    files: ShardFiles | RemoteShardFiles
    faults: dict[int, str]  # rows of the table that disagree with the manifest, and why (dropped when read)
    folder: Path | str


def open_image_source(source: str | Path, config: ImageLoaderConfig,
                      storage_options: Mapping[str, Any] | None) -> ImageSource:
    """Open ``source`` with ``storage_options`` and ``config``'s retry, cache and checksum options; raises naming
    the source."""
    c = config
    location, manifest = open_dataset(source, storage_options, retry_policy(c.retries, c.retry_backoff),
                                      c.remote_timeout)
    folder = location.root if not location.remote else location.display()
    if manifest.kind != "images":
        raise ShardError(str(folder), f"holds {manifest.kind!r} shards, not images "
                                      "(convert with `dataio convert images`)")
    table = _read_table(location, manifest, c)
    if len(table) != manifest.num_samples:
        raise ValueError(f"{folder}: sample table has {len(table)} rows, manifest {manifest.num_samples}")
    labelled = table.label is not None and LABEL_FIELD.name in manifest.table_columns()  # a declared class label
    problem = labelled and class_list_problem(manifest.classes, table.label, location.display(MANIFEST_NAME))
    if problem:
        raise ManifestError(problem)
    check = kind_of(manifest).part("check")  # the kind's own columns (pairs: text, tokenizer record)
    problem = check(manifest, table.table) if check is not None else None
    if problem:
        raise ManifestError(f"{location.display(manifest.sample_table)}: {problem}")
    files = _open_files(location, manifest, c)
    faults = table_faults(table, [s.bytes for s in manifest.shards], len(manifest.classes))
    return ImageSource(location, manifest, table, files, faults, folder)


def _read_table(location: Location, manifest: Manifest, config: ImageLoaderConfig) -> SampleTable:
    """The sample table: memory-mapped locally, read whole (it is small) from remote storage."""
    name = manifest.sample_table
    if not location.remote:
        return read_sample_table(location.path(name), declared=manifest.table_columns())
    try:
        data = location.read_bytes(name, retry_policy(config.retries, config.retry_backoff))
    except remote_errors() as e:
        raise ShardError(location.display(name), f"cannot read the sample table ({describe(e)})") from None
    return read_sample_table(location.display(name), data, declared=manifest.table_columns())


def _open_files(location: Location, manifest: Manifest, config: ImageLoaderConfig) -> ShardFiles | RemoteShardFiles:
    """Descriptors of the local shards, or range readers of the remote ones (with the optional cache)."""
    c = config
    if not location.remote:
        return ShardFiles(location.root, manifest, c.verify_checksums)
    cache = None
    if c.cache_dir is not None:  # one subfolder per data set (URL and manifest)
        key = f"{location.cache_key()}-{manifest.fingerprint()}"
        cache = RangeCache(Path(c.cache_dir) / key, c.cache_limit)
    return RemoteShardFiles(location, manifest, retry=retry_policy(c.retries, c.retry_backoff), cache=cache)
