"""One way to read a source file of an image folder, local or on object storage: by the folder and its stored path.

The converters' workers get the source folder and an input's escaped relative path (``image_tree.escape_path``),
never an open file: a local folder is a path (read through the gate, bounded), a URL a ``RemoteRoot`` (read
through the storage layer with its retries, the size asked before a byte is fetched). Both raise ``FileTooLarge``
with the same message for a file past the limit, and an ``OSError`` (FileNotFoundError for a missing one)
otherwise, so the rejection lines are the same for a folder and its copy on object storage.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dataio.formats.images.image_tree import read_regular_file, source_path
from dataio.formats.remote.source_files import RemoteRoot, remote_root

SourceFolder = str | bytes | Path | RemoteRoot


def source_of(config: Any) -> Path | RemoteRoot:
    """A converter config's source: its local ``src`` path, or its URL with the config's storage options."""
    return remote_root(config.src, getattr(config, "storage_options", None)) or Path(config.src)


def remote_name(relative: str) -> str:
    """The object name of a stored relative path (checked as a local one is: no ``..``, not absolute)."""
    return os.fsdecode(source_path("", relative))


def read_source_file(src: SourceFolder, relative: str, limit: int, *, inside: bool = False) -> bytes:
    """The bytes of the file ``relative`` of the source folder ``src``, at most ``limit``; ``inside``: a local
    link must not leave the folder (a caption; an image may: it is decoded and checked before it is packed)."""
    if isinstance(src, RemoteRoot):
        return src.read(remote_name(relative), limit)
    return read_regular_file(source_path(src, relative), limit, root=src if inside else None)


def source_file_size(src: SourceFolder, relative: str) -> int:
    """The size of the file ``relative`` of ``src`` (a remote one's from one HEAD request)."""
    if isinstance(src, RemoteRoot):
        return src.size(remote_name(relative))
    return os.stat(source_path(src, relative)).st_size
