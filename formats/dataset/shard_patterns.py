"""What a source without a manifest is, in one line: a folder of tars not indexed yet, or open_clip's brace pattern.

open_clip and webdataset name shards as ``DIR/{00000..00003}.tar``; dataio reads folders. A pattern that names every
shard of an indexed folder is that folder; any other is refused naming the folder to give (``pattern_refusal``: its
count known from its bounds, never expanded past the folder's shard count). A
folder (or a pattern's folder) of ``.tar`` files without a manifest gets the command that adopts them in place,
``dataio index DIR``, rather than a question about ``dataio convert``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

RANGE = re.compile(r"\{(\d+)\.\.(\d+)\}")  # webdataset's numeric range, zero-padded to its first bound's width
LIST = re.compile(r"\{([^{}]*,[^{}]*)\}")  # a brace list {a,b}


def expand(name: str) -> list[str]:
    """The names a brace pattern stands for (numeric ranges and lists, as braceexpand expands them)."""
    return list(iter_names(name))


def iter_names(name: str) -> Iterator[str]:
    """``expand``'s names one at a time, so a caller takes only as many as it compares."""
    found = RANGE.search(name) or LIST.search(name)
    if found is None:
        yield name
        return
    for part in _parts(found):
        yield from iter_names(name[:found.start()] + part + name[found.end():])


def pattern_count(name: str) -> int:
    """How many names ``name`` stands for, from its bounds and lists (nothing expanded: a range of 10**8 names
    costs what one costs)."""
    found = RANGE.search(name) or LIST.search(name)
    if found is None:
        return 1
    first = next(iter(_parts(found)), "")
    return _size(found) * pattern_count(name[:found.start()] + first + name[found.end():])


def _parts(found: re.Match) -> Iterable[str]:
    if found.re is RANGE:
        low, high = found.group(1), found.group(2)
        return (str(i).zfill(len(low)) for i in range(int(low), int(high) + 1))
    return found.group(1).split(",")


def _size(found: re.Match) -> int:
    if found.re is RANGE:
        return max(int(found.group(2)) - int(found.group(1)) + 1, 0)
    return len(found.group(1).split(","))


def is_pattern(source: str | Path) -> bool:
    """Whether ``source`` is a brace pattern of shard names (``DIR/{00000..00003}.tar``)."""
    return bool(RANGE.search(Path(source).name) or LIST.search(Path(source).name))


def pattern_refusal(source: str | Path, folder: Path, shards: set[str]) -> str | None:
    """None when the pattern ``source`` names exactly the folder's ``shards``; else the one line refusing it. Its
    count is known from its bounds first, and at most one name more than the folder holds is built, so a pattern
    of a huge range is refused at once, in bounded memory."""
    name = Path(source).name
    count = pattern_count(name)
    named = list(islice(iter_names(name), len(shards) + 1))
    if count == len(shards) and set(named) == shards:
        return None
    return refused_pattern(source, folder, shards, named, count)


def no_manifest(path: Path, given: str | Path) -> str:
    """The one line for ``given`` (a folder, or a pattern) whose manifest ``path`` is missing."""
    folder = path.parent
    tars = sorted(folder.glob("*.tar")) if folder.is_dir() else []
    if tars:
        return (f"{given}: no manifest: {len(tars)} .tar file{'s' if len(tars) != 1 else ''} not indexed yet; run "
                f"`dataio index {folder}` (it adopts webdataset/img2dataset tars in place), then read the folder")
    return f"{path}: no manifest (is this a folder written by `dataio convert` or `dataio index`?)"


def refused_pattern(given: str | Path, folder: Path, shards: set[str], named: list[str], count: int) -> str:
    """The one line for a pattern (``count`` names, the first ``named``) that is not its indexed folder's whole
    shard list."""
    outside = [name for name in named if name not in shards]
    what = (f"names {outside[0]}, not a shard of it" if outside else
            f"names {count} of its {len(shards)} shard{'s' if len(shards) != 1 else ''}")
    return (f"{given}: a shard pattern is read as its folder, and this one {what}; give the folder {folder} (a "
            "subset of shards: write it to a folder of its own, or use dataio merge)")
