"""A bounded local cache of byte ranges read from remote shards: a second epoch runs at local speed.

One file per cached range under ``folder`` (named by shard, offset and
size), written to a temporary name and renamed, so a reader never sees half
a range, even across processes. When the total passes ``limit`` bytes the
least recently used ranges are removed. Cached bytes are still checked
against the sample table's checksum by the loader, so a damaged cache file
is named like a damaged shard.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path


class RangeCache:
    """``get``/``put`` of ``(shard file, offset, size)`` ranges; thread-safe within one process."""

    def __init__(self, folder: str | Path, limit: int) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.limit = limit
        self._lock = threading.Lock()
        self._sizes: OrderedDict[str, int] = OrderedDict()  # name -> bytes, least recently used first
        entries = []
        for entry in os.scandir(self.folder):
            if entry.name.startswith("."):  # an unfinished write of a killed process
                os.unlink(entry.path)
            elif entry.is_file():
                stat = entry.stat()
                entries.append((stat.st_mtime, entry.name, stat.st_size))
        for _, name, size in sorted(entries):
            self._sizes[name] = size
        self.total = sum(self._sizes.values())
        self.hits = self.misses = 0

    @staticmethod
    def _name(shard: str, offset: int, size: int) -> str:
        return f"{shard}@{offset}+{size}"

    def get(self, shard: str, offset: int, size: int) -> bytes | None:
        """The cached bytes of the range, or None."""
        name = self._name(shard, offset, size)
        with self._lock:
            if name not in self._sizes:
                self.misses += 1
                return None
            self._sizes.move_to_end(name)
            self.hits += 1
        try:
            data = (self.folder / name).read_bytes()
        except FileNotFoundError:  # evicted by another process sharing the folder
            with self._lock:
                self.total -= self._sizes.pop(name, 0)
            return None
        return data if len(data) == size else None

    def put(self, shard: str, offset: int, size: int, data: bytes) -> None:
        """Store the range (skipped when it alone exceeds the limit), evicting the oldest past the limit."""
        if len(data) > self.limit:
            return
        name = self._name(shard, offset, size)
        tmp = self.folder / f".{name}.{threading.get_ident()}.partial"
        tmp.write_bytes(data)
        os.replace(tmp, self.folder / name)
        with self._lock:
            self.total += len(data) - self._sizes.pop(name, 0)
            self._sizes[name] = len(data)
            while self.total > self.limit and self._sizes:
                old, size_old = self._sizes.popitem(last=False)
                self.total -= size_old
                (self.folder / old).unlink(missing_ok=True)
