"""Files written whole or not at all, and their checksums (shared by the packers and the trainer's checkpoints)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from dataio.formats.errors import OutputError


@contextmanager
def atomic_writer(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file that appears at ``path`` only once the block ends without error.

    It is written to a hidden temp file beside ``path``, fsynced and renamed,
    so a kill never leaves a half-written ``path``, and an exception removes
    the temp file; an OSError (disk full) is raised as ``OutputError`` naming ``path``.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        _unlink_quietly(tmp)
        if isinstance(e, OSError):  # disk full, quota, I/O error: one line naming the file
            raise OutputError(path, e) from None
        raise


def _unlink_quietly(path: Path) -> None:
    """Remove a temp file while handling another error: a second error here must not hide the first."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


@contextmanager
def output_errors(path: str | Path) -> Iterator[None]:
    """OSErrors of the block (disk full, I/O error) become an ``OutputError`` naming ``path``."""
    try:
        yield
    except OSError as e:
        raise OutputError(path, e) from None


def write_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file and a rename."""
    with atomic_writer(path) as f:
        f.write(data)


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()
