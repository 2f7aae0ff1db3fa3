"""Atomic WebDataset shard writing, DALI index files and the sample table.

Shards are written as webdataset's ``TarWriter`` writes them (``sample_tar``) into a temp file that is
renamed into place only when complete, so a crash never leaves a half-written
shard under a final name. Each finished shard is scanned once to produce the
index file DALI's ``fn.readers.webdataset`` needs (the ``wds2idx`` v1.2
format) and the member offsets the turbo reader uses for random access.
"""

from __future__ import annotations

import os
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataio.formats.errors import OutputError
from dataio.formats.files import sha256_file, write_atomic
from dataio.formats.file_gate import open_input, open_new
from dataio.formats.dataset.manifest import ShardEntry
from dataio.formats.dataset.sample_tar import SampleTarWriter
from dataio.formats.dataset.shard_rule import closes_shard

TAR_BLOCK = 512
FIXED_MTIME = 0  # reproducible tar files: identical bytes on every run


@dataclass(frozen=True)
class MemberLocation:
    """Where one sample's component lives inside its shard."""

    key: str
    extension: str
    offset: int
    size: int


def shard_name(index: int) -> str:
    return f"shard-{index:06d}.tar"


def member_size_in_tar(payload: int) -> int:
    """Bytes a member of ``payload`` bytes takes in a tar: header + padded data."""
    return TAR_BLOCK + -(-payload // TAR_BLOCK) * TAR_BLOCK


def scan_tar(path: str | Path) -> list[list[MemberLocation]]:
    """Group a tar's regular members by sample key, samples in the order their key first appears.

    Members of a key need not be adjacent: ``tar cf x.tar *.jpg *.cls`` writes every image, then
    every label, and webdataset-style grouping of neighbours would split each sample in two. A
    sample's members keep file order; a repeated ``KEY.EXT`` stays in the list (``duplicate_members``
    finds it).
    """
    samples: dict[str, list[MemberLocation]] = {}
    with open_input(path) as file, tarfile.open(fileobj=file, mode="r:") as tar:
        for member in tar:
            if not member.isreg():
                continue
            name = member.name
            dot = name.find(".", name.rfind("/") + 1)
            if dot <= 0:
                continue
            key, ext = name[:dot], name[dot + 1 :]
            samples.setdefault(key, []).append(MemberLocation(key, ext, member.offset_data, member.size))
    return list(samples.values())


def duplicate_members(components: list[MemberLocation]) -> tuple[list[MemberLocation], list[MemberLocation]]:
    """(the first member of each extension, the later repeats): the rule for a ``KEY.EXT`` written twice."""
    kept: dict[str, MemberLocation] = {}
    repeats = []
    for c in components:
        if c.extension.lower() in kept:
            repeats.append(c)
        else:
            kept[c.extension.lower()] = c
    return list(kept.values()), repeats


def dali_index_text(samples: list[list[MemberLocation]]) -> str:
    """The index file text, byte-identical to what DALI's ``wds2idx`` writes."""
    lines = [f"v1.2 {len(samples)}"]
    for components in samples:
        lines.append(" ".join(f"{c.extension} {c.offset} {c.size} {c.key}.{c.extension}" for c in components))
    return "\n".join(lines) + "\n"


class ShardWriter:
    """Writes samples into size-bounded shards ``shard-NNNNNN.tar`` in ``folder``.

    ``write`` takes a webdataset sample dict (``__key__`` plus extension ->
    bytes/str). ``close`` finishes the last shard. ``entries`` and
    ``locations`` describe what was written; ``record_sizes`` each sample's size
    in the shard rule's units (``shard_rule``: what a split conversion's merge replays).
    """

    EMPTY_BYTES = 2 * TAR_BLOCK  # an open shard's end-of-archive blocks

    def __init__(self, folder: str | Path, max_bytes: int, max_count: int | None = None, first_index: int = 0):
        if max_bytes < TAR_BLOCK * 4:
            raise ValueError(f"shard size {max_bytes} bytes is too small")
        self.folder = Path(folder)
        self.max_bytes, self.max_count = max_bytes, max_count
        self.next_index = first_index
        self.entries: list[ShardEntry] = []
        self.locations: list[list[list[MemberLocation]]] = []
        self._tar: SampleTarWriter | None = None
        self._file: Any = None
        self._tmp: Path | None = None
        self._bytes = 0
        self._count = 0
        self.record_sizes: list[int] = []

    def write(self, sample: dict[str, Any]) -> ShardEntry | None:
        """Add ``sample``; returns the entry of the shard this closed first (when it was full), else None."""
        size = sum(member_size_in_tar(len(v)) for k, v in sample.items() if not k.startswith("_"))
        full = closes_shard(self._count, self._bytes, size, self.max_bytes, self.max_count)
        finished = self.finish_shard() if full else None
        try:
            if self._tar is None:
                self._open()
            assert self._tar is not None
            self._tar.write(sample)
        except OSError as e:  # disk full: one line naming the shard, and no partial file left
            where = self.folder / shard_name(self.next_index)
            self.abort()
            raise OutputError(where, e) from None
        self._bytes += size
        self._count += 1
        self.record_sizes.append(size)
        return finished

    def _open(self) -> None:
        self._tmp = self.folder / f".{shard_name(self.next_index)}.partial"
        self._file = open_new(self._tmp)  # created new: a link planted as the temp file is removed, not followed
        self._tar = SampleTarWriter(self._file, mtime=FIXED_MTIME)
        self._bytes = self.EMPTY_BYTES
        self._count = 0

    def finish_shard(self) -> ShardEntry | None:
        """Close the open shard, index it, checksum it and rename it into place."""
        if self._tar is None:
            return None
        assert self._tmp is not None
        name = shard_name(self.next_index)
        try:
            self._tar.close()
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            samples = scan_tar(self._tmp)
            index_name = name[: -len(".tar")] + ".idx"
            write_atomic(self.folder / index_name, dali_index_text(samples).encode())
            entry = ShardEntry(
                file=name,
                index=index_name,
                num_samples=len(samples),
                bytes=self._tmp.stat().st_size,
                sha256=sha256_file(self._tmp),
            )
            os.replace(self._tmp, self.folder / name)
        except OSError as e:  # disk full while finishing: one line naming the shard, the partial file removed
            self.abort()
            raise OutputError(self.folder / name, e) from None
        self.entries.append(entry)
        self.locations.append(samples)
        self._tar = self._file = self._tmp = None
        self.next_index += 1
        return entry

    def close(self) -> ShardEntry | None:
        return self.finish_shard()

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, kind: type | None, *rest: object) -> None:
        """On an exception (or interrupt), drop the partial shard; the finished ones stay."""
        if kind is not None:
            self.abort()

    def abort(self) -> None:
        """Drop the open shard's partial file (on error or interrupt)."""
        for close in (self._tar, self._file):  # the tar stream first, so it never writes to a closed file later
            if close is not None:
                try:
                    close.close()
                except (OSError, ValueError):  # disk full again, or already closed: the file goes anyway
                    pass
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
        self._tar = self._file = self._tmp = None
