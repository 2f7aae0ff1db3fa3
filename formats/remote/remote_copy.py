"""Whole-file copies of a remote data set into a local folder: for readers that need every byte.

Token shards are memory-mapped Arrow files and ``dataio verify`` hashes
every shard, so both take whole files: each is downloaded to a temporary
name, checked against the manifest's size and sha256, and renamed; a copy
already there with the right size is kept (a second run reads nothing). The
local folder then looks exactly like one ``dataio convert`` wrote.
"""

from __future__ import annotations

import os
from pathlib import Path

from dataio.formats.errors import ShardError
from dataio.formats.files import sha256_file
from dataio.formats.dataset.manifest import Manifest
from dataio.formats.remote.storage import Location, RetryPolicy, describe, remote_errors


def dataset_files(manifest: Manifest) -> list[str]:
    """Every file a manifest names besides itself: shards, their indexes, the sample table, the tokenizer."""
    names = []
    for entry in manifest.shards:
        names += [entry.file] + ([entry.index] if entry.index else [])
    if manifest.kind == "images" and manifest.sample_table:
        names.append(manifest.sample_table)
    tokenizer = manifest.options.get("tokenizer")
    if isinstance(tokenizer, dict) and isinstance(tokenizer.get("file"), str):
        names.append(Path(tokenizer["file"]).name)
    return names


def copy_dataset(location: Location, manifest: Manifest, dest: Path, retry: RetryPolicy, *,
                 strict: bool = True) -> list[str]:
    """Copy the data set at ``location`` into ``dest``; returns the names missing remotely.

    With ``strict`` a missing file, or a shard whose copy is not the
    manifest's size and sha256, raises ``ShardError`` naming its URL; without
    it (``dataio verify``) missing files are returned and the copies kept as
    they came, for the checks to name.
    """
    dest.mkdir(parents=True, exist_ok=True)
    sizes = {entry.file: entry for entry in manifest.shards}
    missing = []
    for name in dataset_files(manifest):
        path, entry = dest / name, sizes.get(name)
        if path.is_file() and (entry is None or path.stat().st_size == entry.bytes):
            continue
        tmp = dest / f".{name}.partial"
        try:
            retry.call(lambda name=name, tmp=tmp: location.fs.get_file(location.path(name), str(tmp)))
        except FileNotFoundError:
            if strict:
                raise ShardError(location.display(name), "missing") from None
            missing.append(name)
            continue
        except remote_errors() as e:
            raise ShardError(location.display(name), f"cannot be read ({describe(e)})") from None
        if strict and entry is not None and (tmp.stat().st_size != entry.bytes or sha256_file(tmp) != entry.sha256):
            tmp.unlink()
            raise ShardError(location.display(name), "the copy does not match the manifest's size and sha256")
        os.replace(tmp, path)
    manifest.write(dest)  # last, as a converter does: its presence means the copy is whole
    return missing
