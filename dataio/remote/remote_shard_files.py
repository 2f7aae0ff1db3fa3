"""Byte ranges of samples in shards on object storage or HTTP, through fsspec.

The remote twin of ``ShardFiles``: a sample is one range request (never its
whole shard); ``read_many`` fetches the ranges of a whole batch with one
``fs.cat_ranges`` call, which the async backends (s3fs, HTTP) issue
concurrently. Transient failures (resets, timeouts, 5xx) are retried with
exponential backoff; a missing object or refused credentials are not. What
still fails comes back as an ``OSError`` naming the shard's URL (credentials
removed), so the loader's ``on_error`` policy applies to it like to a damaged
sample. An optional ``RangeCache`` keeps fetched ranges on local disk; it is
only a cache: given the samples' checksums, a cached range that fails its
checksum is discarded (with a warning naming the cache file) and read again
from the source, and a fetched range that fails its checksum is not cached,
so only a damaged source is reported as a damaged shard.
"""

from __future__ import annotations

import threading
import time

from dataio.formats.errors import ShardError
from dataio.formats.dataset.manifest import Manifest
from dataio.formats.dataset.sample_table import sample_checksum
from dataio.formats.remote.storage import Location, RetryPolicy, describe, is_transient, remote_errors
from dataio.remote.range_cache import RangeCache

Request = tuple[int, int, int]  # (shard number, offset, size)


class RemoteShardFiles:
    """Range reads from every shard of a remote manifest; ``names`` are the shards' redacted URLs."""

    remote = True  # the loader fetches a batch's ranges ahead with read_many

    def __init__(self, location: Location, manifest: Manifest, *, retry: RetryPolicy,
                 cache: RangeCache | None = None) -> None:
        self.location, self.retry, self.cache = location, retry, cache
        self.files = [entry.file for entry in manifest.shards]
        self.names = [location.display(entry.file) for entry in manifest.shards]
        self._paths = [location.path(entry.file) for entry in manifest.shards]
        self._lock = threading.Lock()
        self._in_flight: dict[int, tuple[float, list[int]]] = {}  # cat_ranges call -> (start, shards)
        self.requests = self.bytes_fetched = 0  # ranges and bytes that went over the network
        for path, name, entry in zip(self._paths, self.names, manifest.shards, strict=True):
            try:
                size = retry.call(lambda path=path: location.fs.size(path))
            except FileNotFoundError:
                raise ShardError(name, "missing") from None
            except remote_errors() as e:
                raise ShardError(name, f"cannot be reached ({describe(e)})") from None
            if size is not None and size != entry.bytes:
                raise ShardError(name, f"size {size} bytes, manifest says {entry.bytes} (truncated or replaced)")

    def read(self, shard: int, offset: int, size: int) -> bytes:
        """The ``size`` bytes at ``offset`` of shard number ``shard`` (raises the named OSError)."""
        data = self.read_many([(shard, offset, size)])[0]
        if isinstance(data, BaseException):
            raise data
        return data

    def read_many(self, requests: list[Request], checksums: list[int] | None = None) -> list[bytes | OSError]:
        """Each request's bytes, or the ``OSError`` that names why it could not be read.

        ``checksums`` (the sample table's, one per request) are checked
        against cached bytes, and keep bytes that fail them out of the cache.
        """
        results: list[bytes | OSError | None] = [None] * len(requests)
        todo = []
        for i, (shard, offset, size) in enumerate(requests):
            cached = self._cached(shard, offset, size, checksums[i] if checksums is not None else None)
            if cached is not None:
                results[i] = cached
            else:
                todo.append(i)
        for attempt in range(self.retry.attempts):
            if not todo:
                break
            if attempt:
                time.sleep(self.retry.delay(attempt - 1))
            todo = self._fetch(requests, todo, results, checksums, last=attempt == self.retry.attempts - 1)
        return results  # type: ignore[return-value]

    def _cached(self, shard: int, offset: int, size: int, checksum: int | None) -> bytes | None:
        """The range from the cache, or None (absent, or damaged there: then discarded with a warning)."""
        if self.cache is None:
            return None
        data = self.cache.get(self.files[shard], offset, size)
        if data is not None and checksum is not None and sample_checksum(data) != checksum:
            self.cache.discard(self.files[shard], offset, size,
                               f"checksum mismatch (damaged cache file of {self.names[shard]})")
            return None
        return data

    def waiting(self) -> str:
        """The reads in flight now, for a timeout's message ("" when none)."""
        with self._lock:
            calls = list(self._in_flight.values())
        if not calls:
            return ""
        started = min(start for start, _ in calls)
        shards = sorted({shard for _, group in calls for shard in group})
        more = f" and {len(shards) - 1} more shard(s)" if len(shards) > 1 else ""
        return f"waiting on a read of {self.names[shards[0]]}{more} for {time.monotonic() - started:.1f} s"

    def _fetch(self, requests: list[Request], todo: list[int], results: list, checksums: list[int] | None,
               last: bool) -> list[int]:
        """One ``cat_ranges`` over the ranges ``todo``; returns those worth another attempt."""
        paths = [self._paths[requests[i][0]] for i in todo]
        starts = [requests[i][1] for i in todo]
        ends = [requests[i][1] + requests[i][2] for i in todo]
        call = id(paths)
        with self._lock:
            self._in_flight[call] = (time.monotonic(), sorted({requests[i][0] for i in todo}))
        try:
            out = self.location.fs.cat_ranges(paths, starts, ends, on_error="return")
        except remote_errors() as e:  # the whole call failed (e.g. the session could not be set up)
            out = [e] * len(todo)
        finally:
            with self._lock:
                del self._in_flight[call]
        again = []
        fetched = 0
        for i, data in zip(todo, out, strict=True):
            shard, offset, size = requests[i]
            if isinstance(data, (bytes, bytearray)) and len(data) == size:
                results[i] = bytes(data)
                fetched += size
                if self.cache and (checksums is None or sample_checksum(results[i]) == checksums[i]):
                    self.cache.put(self.files[shard], offset, size, results[i])
            elif isinstance(data, (bytes, bytearray)) and len(data) > size:  # the whole file, or from offset on
                results[i] = OSError(f"{self.names[shard]}: asked for bytes {offset}..{offset + size - 1}, got "
                                     f"{len(data)}: the server ignores HTTP Range requests (Python's http.server "
                                     "does); serve the shards with one that honours them (nginx, Apache, S3, ...)")
            elif isinstance(data, (bytes, bytearray)):
                results[i] = OSError(f"{self.names[shard]}: short read at offset {offset}: {len(data)} of {size} "
                                     "bytes (shard replaced?)")
            elif is_transient(data) and not last:
                again.append(i)
            else:
                tries = "" if not is_transient(data) else f" after {self.retry.attempts} attempts"
                results[i] = OSError(f"{self.names[shard]}: {describe(data)}{tries}")
        with self._lock:
            self.requests += len(todo)
            self.bytes_fetched += fetched
        return again

    def close(self) -> None:
        """Nothing to release: fsspec keeps its connections per filesystem instance."""
