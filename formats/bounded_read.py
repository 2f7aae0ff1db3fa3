"""Reading an input file whole, but never more than a limit: at most ``limit + 1`` bytes, whatever the file is.

A file's size from ``stat`` is only a claim: a regular file in ``/proc`` says 0
bytes and reads on for ever (``/proc/self/pagemap``: 256 GiB), a file being
appended to grows while it is read, a pipe has no size. So the size is checked
first (a 50 GB sparse file is refused without reading a byte), and the read then
stops one byte past the limit: that byte tells a file of exactly ``limit`` bytes
from a longer one.
"""

from __future__ import annotations

import os
from pathlib import Path

_CHUNK = 1 << 20


class FileTooLarge(OSError):
    """A file past its size limit; the message is the reason (sizes and the limit), the same on every run."""


def read_fd_at_most(fd: int, limit: int) -> bytes:
    """The bytes of the open file ``fd`` if they are at most ``limit``; ``FileTooLarge`` otherwise."""
    info = os.fstat(fd)
    if info.st_size > limit:
        raise FileTooLarge(f"file too large: {info.st_size:,} bytes (limit {limit:,})")
    chunks, total = [], 0
    while total <= limit and (chunk := os.read(fd, min(_CHUNK, limit + 1 - total))):
        chunks.append(chunk)
        total += len(chunk)
    if total > limit:
        raise FileTooLarge(f"file too large: it reads on past {limit:,} bytes (limit {limit:,}), though its size "
                           f"says {info.st_size:,}")
    return b"".join(chunks)


def read_at_most(path: str | bytes | Path, limit: int) -> bytes:
    """The bytes of the file at ``path`` if they are at most ``limit`` (``FileTooLarge`` otherwise)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_fd_at_most(fd, limit)
    finally:
        os.close(fd)
