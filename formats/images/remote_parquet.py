"""Parquet image sources given as URLs: the objects ``convert images`` packs from, found as ``parquet_files`` finds
a local copy's files, so both pack the same rows under the same ids.

A ``.parquet`` URL is that object (a missing one is one line naming the URL); a glob (``s3://b/data/train-*.parquet``)
the objects it matches (none: one line); a folder URL its ``.parquet`` objects, directly under it or in ``data/`` (a
Hub repository), several splits refused as locally. A folder without any is an image folder (None). The rows are
then read by ``parquet_images`` over range requests (footers, the label column, the row groups packed).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from dataio.formats.errors import UsageError
from dataio.formats.images.parquet_images import refuse_mixed_splits
from dataio.formats.remote.source_files import RemoteRoot, remote_files


def remote_parquet_files(root: RemoteRoot) -> list[RemoteRoot] | None:
    """The Parquet objects of ``root`` in the order a local copy's files are packed, or None for an image folder."""
    if any(c in root.url for c in "*?["):
        files = remote_files(root, {".parquet"})
        if not files:
            raise UsageError(f"{root}: no .parquet files match")
        return files
    if root.url.endswith(".parquet"):
        try:
            root.size()  # one HEAD request: a missing object is named here, not as a missing folder
        except FileNotFoundError:
            raise UsageError(f"{root}: no such object (a Parquet file given as a URL)") from None
        return [root]
    names = root.listing()
    files = _parquet_names(names, "") or _parquet_names(names, "data/")
    if not files:
        return None
    folder = str(PurePosixPath(files[0]).parent)
    refuse_mixed_splits(root, [PurePosixPath(name).name for name in files],
                        root.display(folder) if folder != "." else root.display())
    return [root.child(name) for name in files]


def _parquet_names(names: dict[str, int], folder: str) -> list[str]:
    """The ``.parquet`` objects directly in ``folder`` (as a local folder's ``glob("*.parquet")``), sorted."""
    return sorted(name for name in names if name.startswith(folder) and "/" not in name[len(folder):]
                  and name.endswith(".parquet"))
