"""What a source without a manifest is, in one line: a folder of tars not indexed yet, or open_clip's brace pattern.

open_clip and webdataset name shards as ``DIR/{00000..00003}.tar``; dataio reads folders. A pattern that names every
shard of an indexed folder is that folder (``pattern_folder``); any other is refused naming the folder to give. A
folder (or a pattern's folder) of ``.tar`` files without a manifest gets the command that adopts them in place,
``dataio index DIR``, rather than a question about ``dataio convert``.
"""

from __future__ import annotations

import re
from pathlib import Path

RANGE = re.compile(r"\{(\d+)\.\.(\d+)\}")  # webdataset's numeric range, zero-padded to its first bound's width
LIST = re.compile(r"\{([^{}]*,[^{}]*)\}")  # a brace list {a,b}


def expand(name: str) -> list[str]:
    """The names a brace pattern stands for (numeric ranges and lists, as braceexpand expands them)."""
    found = RANGE.search(name) or LIST.search(name)
    if found is None:
        return [name]
    if found.re is RANGE:
        low, high = found.group(1), found.group(2)
        parts = [str(i).zfill(len(low)) for i in range(int(low), int(high) + 1)]
    else:
        parts = found.group(1).split(",")
    return [full for part in parts for full in expand(name[:found.start()] + part + name[found.end():])]


def is_pattern(source: str | Path) -> bool:
    """Whether ``source`` is a brace pattern of shard names (``DIR/{00000..00003}.tar``)."""
    return bool(RANGE.search(Path(source).name) or LIST.search(Path(source).name))


def pattern_shards(source: str | Path) -> tuple[Path, list[str]]:
    """A pattern's folder and the shard names it expands to."""
    path = Path(source)
    return path.parent, expand(path.name)


def no_manifest(path: Path, given: str | Path) -> str:
    """The one line for ``given`` (a folder, or a pattern) whose manifest ``path`` is missing."""
    folder = path.parent
    tars = sorted(folder.glob("*.tar")) if folder.is_dir() else []
    if tars:
        return (f"{given}: no manifest: {len(tars)} .tar file{'s' if len(tars) != 1 else ''} not indexed yet; run "
                f"`dataio index {folder}` (it adopts webdataset/img2dataset tars in place), then read the folder")
    return f"{path}: no manifest (is this a folder written by `dataio convert` or `dataio index`?)"


def refused_pattern(given: str | Path, folder: Path, shards: set[str], named: list[str]) -> str:
    """The one line for a pattern that is not its indexed folder's whole shard list."""
    outside = [name for name in named if name not in shards]
    what = f"names {outside[0]}, not a shard of it" if outside else f"names {len(named)} of its {len(shards)} shards"
    return (f"{given}: a shard pattern is read as its folder, and this one {what}; give the folder {folder} (a "
            "subset of shards: write it to a folder of its own, or use dataio merge)")
