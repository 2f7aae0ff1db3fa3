"""A converter's source on object storage: a folder (or file) URL whose objects are listed, sized and read.

``RemoteRoot`` is what a converter holds instead of a local source ``Path``: the URL and the command's storage
options (per URL prefix, ``StorageOptions.for_source``), small and picklable, because it travels with every job
to the worker processes (and, on a cluster, to other machines), each of which opens the backend once
(``location``, cached per process: s3fs and aiohttp clients are not shared across a fork). Every request goes
through ``RetryPolicy`` (a reset or 5xx is retried, a 403 or 404 is not), and every failure becomes one line
naming the redacted URL: ``SourceUnreadable`` (bad data, exit 1) or, for a folder that does not exist,
``UsageError`` (as a missing local folder).

Reads are bounded before a byte is fetched: ``read`` asks the object's size first and refuses one past the
limit with its size (``FileTooLarge``, the message the local gate gives), then fetches at most ``limit + 1``
bytes, so an object that grew since is still cut at the limit.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from types import SimpleNamespace
from typing import IO, Any

from dataio.formats.errors import DataioError, UsageError
from dataio.formats.file_gate import FileTooLarge, open_input, open_parquet
from dataio.formats.remote.storage import Location, RetryPolicy, describe, is_remote, open_location, remote_errors

# (pid, url, its options) -> the location this process opened: a forked worker opens its own (a client's event
# loop and connections stay in the process that made them)
_OPEN: dict[tuple[int, str, str], Location] = {}


class SourceUnreadable(DataioError):
    """A source object or listing could not be read: one line naming the URL and why."""


@dataclass(frozen=True)
class RemoteRoot:
    """A source folder or file given as a URL, with the command's storage options (never printed)."""

    url: str
    storage_options: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", self.url.rstrip("/"))

    def __str__(self) -> str:
        return self.display()

    def location(self) -> Location:
        """The backend of this URL, opened once per process."""
        key = (os.getpid(), self.url, repr(sorted((self.storage_options or {}).items(), key=lambda item: str(item[0]))))
        if key not in _OPEN:
            _OPEN[key] = open_location(self.url, self.storage_options)
        return _OPEN[key]

    def path(self, name: str = "") -> str:
        """The backend's path of ``name`` under the root (the root itself for "")."""
        location = self.location()
        return str(location.root) if not name else location.path(name)

    def display(self, name: str = "") -> str:
        """``name``'s URL, redacted, for messages."""
        return self.location().display(name) if name else self.location().display()

    def child(self, name: str) -> "RemoteRoot":
        """The URL of ``name`` under this one, with the same options."""
        return RemoteRoot(f"{self.url}/{name}", self.storage_options)

    def _call(self, what: str, name: str, request: Any, retry: RetryPolicy | None = None) -> Any:
        """``request()`` retried; a storage failure as one line naming the object (a missing one raises
        FileNotFoundError for the caller to name as it does a missing local file)."""
        try:
            return (retry or RetryPolicy()).call(request)
        except FileNotFoundError:
            raise
        except remote_errors() as e:
            raise SourceUnreadable(f"{self.display(name)}: cannot {what} ({describe(e)})") from None

    def size(self, name: str = "", retry: RetryPolicy | None = None) -> int:
        """The object's size in bytes (one HEAD request)."""
        fs, path = self.location().fs, self.path(name)

        def ask() -> int:
            info = fs.info(path)
            if info.get("type") == "directory":  # a key that is also the "folder" of others: the listing's cache
                fs.invalidate_cache(path)  # says folder (size 0, "empty file"); the object itself is asked
                info = fs.info(path)
            return int(info.get("size") or 0)

        return self._call("read its size", name, ask, retry)

    def read(self, name: str, limit: int, retry: RetryPolicy | None = None) -> bytes:
        """The object's bytes, at most ``limit``: a larger one is ``FileTooLarge`` with its size, never fetched."""
        size = self.size(name, retry)
        if size > limit:
            raise FileTooLarge(f"file too large: {size:,} bytes (limit {limit:,})")
        if size == 0:  # a range of an empty object is "not satisfiable": nothing to ask for
            return b""
        fs = self.location().fs
        data = self._call("read it", name, lambda: fs.cat_file(self.path(name), start=0, end=limit + 1), retry)
        if len(data) > limit:  # it grew since its size was asked
            raise FileTooLarge(f"file too large: it reads on past {limit:,} bytes (limit {limit:,}), though its size "
                               f"says {size:,}")
        return data

    def head(self, name: str, count: int) -> bytes:
        """The first ``count`` bytes of the object (a range read: a signature sniffed without the whole file)."""
        fs = self.location().fs
        return self._call("read it", name, lambda: fs.cat_file(self.path(name), start=0, end=count))

    def open(self, name: str = "", *, read_ahead: bool = True) -> IO[bytes]:
        """The object as a seekable binary file whose reads are range requests (fsspec's buffered file);
        ``read_ahead`` False: each read is its own range, nothing after it (s3fs reads ahead 50 MB: a Parquet
        label column read with it would fetch the image bytes that follow)."""
        fs = self.location().fs
        options = {} if read_ahead else {"cache_type": "none"}
        return self._call("open it", name, lambda: fs.open(self.path(name), "rb", **options))

    # what a text converter asks of a source file's path (``text_sources``): its suffix, size and identity
    @property
    def suffix(self) -> str:
        return PurePosixPath(self.url.split("://", 1)[-1]).suffix

    def stat(self) -> SimpleNamespace:
        """The object's size as ``os.stat`` gives a file's (``st_size``)."""
        return SimpleNamespace(st_size=self.size())

    def resolve(self) -> "RemoteRoot":
        return self

    @property
    def name(self) -> str:
        return PurePosixPath(self.url.split("://", 1)[-1]).name

    def __truediv__(self, name: str) -> "RemoteRoot":
        """``images / file_name``, as a local folder's path joins (``convert coco``'s sizes)."""
        return self.child(name)

    def listing(self) -> dict[str, int]:
        """Every object under the folder URL: its path relative to the root -> its size; ``UsageError`` when
        nothing lies there (a missing bucket or prefix, or a file)."""
        fs, root = self.location().fs, self.path()
        try:
            found = RetryPolicy().call(lambda: fs.find(root, detail=True))
        except FileNotFoundError:
            found = {}
        except remote_errors() as e:
            raise SourceUnreadable(f"{self.display()}: cannot list the source folder ({describe(e)})") from None
        prefix = root.rstrip("/") + "/"
        objects = {path[len(prefix):]: int(info.get("size") or 0) for path, info in found.items()
                   if path.startswith(prefix) and info.get("type") != "directory" and not path.endswith("/")}
        if not objects:
            raise UsageError(f"source folder {self.display()} does not exist or is not a folder (no object under it)")
        return objects


def open_source(path: Any) -> IO[bytes]:
    """A source file open for binary reading: a local one through the gate, a ``RemoteRoot`` by range requests."""
    if isinstance(path, RemoteRoot):
        remote_file: RemoteRoot = path
        return remote_file.open()
    return open_input(path)


def open_parquet_source(path: Any, *, read_ahead: bool = True) -> Any:
    """A ``pq.ParquetFile`` of a local file (through the gate) or of a ``RemoteRoot`` (footer and row groups read
    by range requests, as pyarrow reads a local file; ``read_ahead`` False: only the ranges pyarrow asks for)."""
    if not isinstance(path, RemoteRoot):
        return open_parquet(path)
    import pyarrow.parquet as pq  # lazy: only Parquet sources need it

    remote_file: RemoteRoot = path
    return pq.ParquetFile(remote_file.open(read_ahead=read_ahead))


def remote_files(root: "RemoteRoot", suffixes: Any) -> list["RemoteRoot"]:
    """The files a URL names: itself when it is an object, else the objects under it (or matching its glob) with
    one of ``suffixes``, sorted as a local folder's ``rglob`` is (by their path's parts)."""
    if any(c in root.url for c in "*?["):
        fs, pattern = root.location().fs, root.url.split("://", 1)[1]
        scheme = root.url.split("://", 1)[0]
        try:
            found = RetryPolicy().call(lambda: fs.glob(pattern))
        except remote_errors() as e:
            raise SourceUnreadable(f"{root.display()}: cannot list it ({describe(e)})") from None
        return [RemoteRoot(f"{scheme}://{path}", root.storage_options) for path in sorted(found)
                if PurePosixPath(path).suffix.lower() in suffixes]
    fs = root.location().fs
    try:
        if RetryPolicy().call(lambda: fs.info(root.path())).get("type") != "directory":
            return [root]
    except (FileNotFoundError, IsADirectoryError, *remote_errors()):
        pass  # a folder, or nothing (a missing one is named by the listing below)
    names = sorted(root.listing(), key=lambda name: tuple(name.split("/")))
    return [root.child(name) for name in names if PurePosixPath(name).suffix.lower() in suffixes]


def remote_root(source: Any, storage_options: Mapping[str, Any] | None) -> RemoteRoot | None:
    """``source`` as a ``RemoteRoot`` when it is a URL (None for a local path)."""
    if isinstance(source, RemoteRoot):
        return source
    return RemoteRoot(str(source), storage_options) if is_remote(source) else None
