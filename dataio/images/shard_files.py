"""Random access to the bytes of samples inside shard files.

``os.pread`` releases the GIL and is safe to call from many threads on one
descriptor. Shards are checked against the manifest when opened (existence
and size; sha256 too with ``verify_checksums``), so a missing, truncated or
altered shard is named before reading starts, not discovered as a hang.
The descriptors are closed by a ``weakref.finalize``, not ``__del__``: a
loader never closed is then closed at interpreter exit while ``os`` is still
there (a ``__del__`` run during module teardown printed ``Exception ignored
in: ShardFiles.__del__ ... AttributeError``).
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path

from dataio.formats.errors import ShardError
from dataio.formats.file_gate import open_input_fd
from dataio.formats.dataset.manifest import Manifest, check_shard_file


class ShardFiles:
    """Open descriptors of every shard of a manifest; close with ``close()``."""

    remote = False  # reads are local preads (RemoteShardFiles: range requests)

    def __init__(self, folder: Path, manifest: Manifest, verify_checksums: bool = False) -> None:
        self.names = [entry.file for entry in manifest.shards]
        self._fds: list[int] = []
        # closed when collected, or at exit while modules are still whole (a __del__ run during interpreter
        # shutdown found ``os`` gone when a loader was only reachable from a data set view)
        self._closer = weakref.finalize(self, _close_all, self._fds)
        try:
            for entry in manifest.shards:
                path = folder / entry.file
                check_shard_file(path, entry, verify_checksums)
                self._fds.append(open_input_fd(path))  # the gate: a regular file, no FIFO or kernel file
        except BaseException:
            self.close()
            raise

    def read(self, shard: int, offset: int, size: int) -> bytes:
        """The ``size`` bytes at ``offset`` of shard number ``shard``."""
        data = os.pread(self._fds[shard], size, offset)
        if len(data) != size:
            raise ShardError(self.names[shard], f"short read at offset {offset}: {len(data)} of {size} bytes")
        return data

    def close(self) -> None:
        """Close every descriptor (at most once; also done when collected, or at exit)."""
        self._closer()


def _close_all(fds: list[int]) -> None:
    """Close and forget ``fds`` (the list the reads index, so a read after close fails on an IndexError)."""
    while fds:
        os.close(fds.pop())
