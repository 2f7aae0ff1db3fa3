"""A bounded local cache of byte ranges read from remote shards: a second epoch runs at local speed.

One file per cached range under ``folder`` (named by shard, offset and
size). Several loaders in several processes may share the folder (the ranks
of a node on its local disk):

- a range is written to a temporary name unique to the writer (pid, thread,
  random) and published with ``os.replace``, so a reader never sees half a
  range and no writer's temporary file is another's;
- a range missing when it is opened is a miss, whoever removed it (files
  that vanish while the folder is listed or a range is read are expected,
  never an error); an open file stays readable after another process
  removes it;
- reading a range touches its mtime, the recency every process sees; the
  folder is listed again (every process's ranges) when this process's count
  passes ``limit`` bytes or after it has written a tenth of the limit since
  its last listing, and when past the limit the least recently used ranges
  are removed down to 90% of it: listings stay rare, and the folder stays
  within about ``limit * (1 + processes / 10)`` (each process counts only
  its own writes between listings);
- temporary files are removed only when older than ``STALE_PARTIAL``
  seconds (left by a killed writer), never while another process writes.

Nothing here is trusted: ``discard`` removes a range its reader found
damaged (with a warning naming the file), and a failed write only means
the range is not cached.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections import OrderedDict
from pathlib import Path

from dataio.formats.file_gate import FileRefused, open_input, write_new

log = logging.getLogger("dataio")

STALE_PARTIAL = 300.0  # seconds; a range is written in one call of milliseconds
LOW_WATER = 0.9  # share of the limit kept after an eviction


class RangeCache:
    """``get``/``put``/``discard`` of ``(shard file, offset, size)`` ranges; thread- and process-safe."""

    def __init__(self, folder: str | Path, limit: int) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.limit = limit
        self._lock = threading.Lock()
        self._sizes: OrderedDict[str, int] = OrderedDict()  # name -> bytes, least recently used first
        self.total = 0
        self._written = 0  # bytes this process put since its last listing
        self.hits = self.misses = 0
        self._scan()

    @staticmethod
    def _name(shard: str, offset: int, size: int) -> str:
        return f"{shard}@{offset}+{size}"

    def path(self, shard: str, offset: int, size: int) -> Path:
        """The cache file of a range (present or not)."""
        return self.folder / self._name(shard, offset, size)

    def _scan(self) -> None:
        """Take the folder as it is now (every process's ranges, by mtime); remove stale temporary files."""
        entries = []
        now = time.time()
        for entry in os.scandir(self.folder):
            try:
                stat = entry.stat(follow_symlinks=False)
                if entry.name.startswith("."):  # a writer's temporary file: its own until it is stale
                    if now - stat.st_mtime > STALE_PARTIAL:
                        _remove(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    entries.append((stat.st_mtime, entry.name, stat.st_size))
            except FileNotFoundError:  # published, evicted or removed by another process meanwhile
                continue
        self._sizes = OrderedDict((name, size) for _, name, size in sorted(entries))
        self.total = sum(self._sizes.values())
        self._written = 0

    def get(self, shard: str, offset: int, size: int) -> bytes | None:
        """The cached bytes of the range, or None (absent, removed meanwhile, or of the wrong size)."""
        name = self._name(shard, offset, size)
        path = self.folder / name
        try:
            with open_input(path) as f:  # the gate: a FIFO or link to a device planted in the cache is refused
                data = f.read(size + 1)
        except FileRefused as e:
            self.discard(shard, offset, size, str(e))
            with self._lock:
                self.misses += 1
            return None
        except FileNotFoundError:  # never cached, or evicted by this or another process
            with self._lock:
                self.misses += 1
                self.total -= self._sizes.pop(name, 0)
            return None
        if len(data) != size:
            self.discard(shard, offset, size, f"{len(data)} bytes, not {size} (damaged cache file)")
            with self._lock:
                self.misses += 1
            return None
        try:
            os.utime(path)  # the recency other processes' evictions see
        except FileNotFoundError:
            pass
        with self._lock:
            self.hits += 1
            if name not in self._sizes:  # written by another process
                self.total += size
            self._sizes[name] = size
            self._sizes.move_to_end(name)
        return data

    def put(self, shard: str, offset: int, size: int, data: bytes) -> None:
        """Store the range (skipped when it alone exceeds the limit), evicting the oldest past the limit."""
        if len(data) > self.limit:
            return
        name = self._name(shard, offset, size)
        tmp = self.folder / f".{name}.{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex[:8]}.partial"
        try:
            write_new(tmp, data)
            os.replace(tmp, self.folder / name)
        except OSError as e:  # disk full, folder removed: the range is just not cached
            log.debug("%s: not cached (%s)", self.folder / name, e)
            _remove(tmp)
            return
        with self._lock:
            self.total += len(data) - self._sizes.pop(name, 0)
            self._sizes[name] = len(data)
            self._written += len(data)
            if self.total > self.limit or self._written > self.limit * (1 - LOW_WATER):
                self._scan()
                if self.total > self.limit:
                    self._evict()

    def _evict(self) -> None:
        """Remove the least recently used ranges of the folder (all processes') down to the low-water mark."""
        while self.total > self.limit * LOW_WATER and self._sizes:
            old, size = self._sizes.popitem(last=False)
            self.total -= size
            _remove(self.folder / old)  # perhaps evicted by another process too

    def discard(self, shard: str, offset: int, size: int, reason: str) -> None:
        """Remove a range its reader found damaged, with a warning naming the cache file and ``reason``."""
        name = self._name(shard, offset, size)
        log.warning("%s: %s; removed from the cache, read again from the source", self.folder / name, reason)
        _remove(self.folder / name)
        with self._lock:
            self.total -= self._sizes.pop(name, 0)


def _remove(path: Path) -> None:
    """Unlink ``path`` if it is there; another process may have removed it, and a cache never fails a read."""
    try:
        path.unlink()
    except OSError:
        pass
