"""Whole-file copies of a remote data set into a local folder: for readers that need every byte.

Token shards are memory-mapped Arrow files and ``dataio verify`` hashes
every shard, so both take whole files: each is downloaded to a temporary
name unique to the process and thread, checked against the manifest's size
and sha256, and published with ``os.replace``, so several processes may fill
one folder at once (the ranks of a node sharing a cache). A shard already
there is a cache, not the truth: it is kept only if its size and sha256
match the manifest (hashing reads it locally, about 1 GB/s), else it is
removed with a warning naming it and downloaded again; only a download that
fails the check names the remote shard. The local folder then looks exactly
like one ``dataio convert`` wrote.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from pathlib import Path

from dataio.formats.errors import ShardError
from dataio.formats.files import sha256_file
from dataio.formats.dataset.manifest import Manifest, ShardEntry
from dataio.formats.remote.storage import Location, RetryPolicy, describe, remote_errors

log = logging.getLogger("dataio")


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

    With ``strict`` a missing file, or a shard whose download is not the
    manifest's size and sha256, raises ``ShardError`` naming its URL; without
    it (``dataio verify``) missing files are returned and the copies kept as
    they came, for the checks to name.
    """
    dest.mkdir(parents=True, exist_ok=True)
    sizes = {entry.file: entry for entry in manifest.shards}
    missing = []
    for name in dataset_files(manifest):
        path, entry = dest / name, sizes.get(name)
        if _kept(path, entry, strict):
            continue
        path.parent.mkdir(parents=True, exist_ok=True)  # a merged data set's shards lie in its part folders
        tmp = path.parent / f".{path.name}.{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex[:8]}.partial"
        try:
            retry.call(lambda name=name, tmp=tmp: location.fs.get_file(location.path(name), str(tmp)))
        except FileNotFoundError:
            if strict:
                raise ShardError(location.display(name), "missing") from None
            missing.append(name)
            continue
        except remote_errors() as e:
            tmp.unlink(missing_ok=True)
            raise ShardError(location.display(name), f"cannot be read ({describe(e)})") from None
        if strict and entry is not None and (tmp.stat().st_size != entry.bytes or sha256_file(tmp) != entry.sha256):
            tmp.unlink()
            raise ShardError(location.display(name), "the copy does not match the manifest's size and sha256")
        os.replace(tmp, path)
    manifest.write(dest)  # last, as a converter does: its presence means the copy is whole
    return missing


def _kept(path: Path, entry: ShardEntry | None, strict: bool) -> bool:
    """Whether the copy at ``path`` can stay: present and, for a shard, the manifest's size (and with
    ``strict`` its sha256); a damaged one is removed with a warning naming it."""
    try:
        if not path.is_file():
            return False
        if entry is None:
            return True
        size = path.stat().st_size
        if size != entry.bytes:
            damage = f"size {size} bytes, manifest says {entry.bytes}"
        elif strict and sha256_file(path) != entry.sha256:
            damage = "sha256 does not match the manifest"
        else:
            return True
    except FileNotFoundError:  # replaced or removed by another process meanwhile: copied again
        return False
    log.warning("%s: %s (damaged cache file); removed, downloaded again", path, damage)
    path.unlink(missing_ok=True)
    return False
