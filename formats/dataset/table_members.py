"""``dataio verify``: each sample-table row must point at its own image member, as the shard's headers name it.

A row's ``offset`` and ``size`` are where the reader takes the image bytes
from; nothing else ties them to the row's key. A row pointing at another
sample's member (or at a ``.cls`` or ``.json`` member, or between members)
reads wrong bytes without any error when its checksum was copied along. Here
each shard's members are listed (tar headers only: nothing is extracted; for
Arrow image shards, where each row's bytes lie), and each row must match
the member whose data starts at its offset: its key, an image extension, its
size. The loader does not list members at open (that reads every header of
every shard); it finds overlapping rows instead (``row_overlaps``).
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from dataio.formats.dataset.arrow_image_shards import image_locations
from dataio.formats.dataset.manifest import Manifest
from dataio.formats.dataset.sample_table import SampleTable
from dataio.formats.dataset.shard_members import IMAGE_MEMBERS
from dataio.formats.dataset.wds_shards import MemberLocation, scan_tar


def _members(path: Path) -> dict[int, MemberLocation]:
    """The shard's members by the offset of their data (the first member at an offset kept)."""
    samples = image_locations(path) if path.suffix == ".arrow" else scan_tar(path)
    members: dict[int, MemberLocation] = {}
    for components in samples:
        for member in components:
            members.setdefault(member.offset, member)
    return members


def _mismatch(member: MemberLocation | None, key: str, offset: int, size: int) -> str | None:
    """Why the row (``key``, ``offset``, ``size``) does not point at its own image member, or None."""
    where = f"bytes {offset}+{size}"
    if member is None:
        return f"{where} are not the data of any member of the shard"
    name = f"{member.key}.{member.extension}"
    if member.key != key:
        return f"{where} are member {name!r}, another sample's"
    if member.extension.lower() not in IMAGE_MEMBERS:
        return f"{where} are member {name!r}, not an image"
    if member.size != size:
        return f"{where}: member {name!r} there holds {member.size} bytes"
    return None


def member_faults(folder: Path, manifest: Manifest, table: SampleTable, skip: set[int] | dict[int, str],
                  bad_shards: set[int]) -> dict[int, str]:
    """Rows (other than ``skip``, in shards other than ``bad_shards``) that do not point at their own image
    member, each with the reason; a shard that cannot be listed is left to the shard checks."""
    faults: dict[int, str] = {}
    rows_of: dict[int, list[int]] = {}
    for row, shard in enumerate(table.shard.tolist()):
        if row not in skip and shard not in bad_shards:
            rows_of.setdefault(shard, []).append(row)
    keys = table.table.column("key")
    for shard, rows in rows_of.items():
        try:
            members = _members(folder / manifest.shards[shard].file)
        except (tarfile.TarError, OSError, EOFError, ValueError):
            continue  # named by the shard checks (not a readable tar)
        for row in rows:
            offset, size = int(table.offset[row]), int(table.size[row])
            reason = _mismatch(members.get(offset), keys[row].as_py(), offset, size)
            if reason:
                faults[row] = reason
    return faults
