"""Files written whole or not at all, and their checksums (shared by the packers and the trainer's checkpoints)."""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from dataio.formats.errors import OutputError, UsageError


TEMP_INFIX = ".tmp-"  # .NAME.tmp-HOST-PID: the writer of a temp file, to tell a dead one's leftovers
_HOST = socket.gethostname().replace("/", "_")


@contextmanager
def atomic_writer(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file that appears at ``path`` only once the block ends without error.

    It is written to a hidden temp file beside ``path``, fsynced and renamed,
    so a kill never leaves a half-written ``path``, and an exception removes
    the temp file; an OSError (disk full) is raised as ``OutputError`` naming ``path``.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}{TEMP_INFIX}{_HOST}-{os.getpid()}")
    try:
        with os.fdopen(_new_file(tmp), "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        _unlink_quietly(tmp)
        if isinstance(e, OSError):  # disk full, quota, I/O error: one line naming the file
            raise OutputError(path, e) from None
        raise


NO_FOLLOW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _new_file(path: Path) -> int:
    """A new file at ``path``, created by this call: whatever was there (a link planted to a file of the user's,
    a leftover of this pid) is removed first, never opened, so nothing is written through a link."""
    try:
        return os.open(path, NO_FOLLOW, 0o644)
    except FileExistsError:
        path.unlink()  # the entry itself: a symbolic link goes, its target stays as it was
        return os.open(path, NO_FOLLOW, 0o644)


def refuse_link(path: Path, what: str) -> None:
    """A UsageError when ``path``, where dataio keeps ``what``, is a symbolic link: writing there would write
    where the link points (a file or folder of the user's, planted or left by mistake)."""
    if path.is_symlink():
        raise UsageError(f"{path} is a link (to {os.readlink(path)}), where dataio keeps {what}: remove it, "
                         "dataio writes nothing through links")


def remove_stale_temps(path: str | Path) -> list[Path]:
    """Remove the temp files ``atomic_writer(path)`` left when its process died (SIGKILL, OOM): returns them.

    Only files of this host whose writer process is gone are removed: a live writer's file (another
    process writing the same path now) is left alone, and so is a file of another host (a shared file
    system), since its process cannot be checked from here.
    """
    path = Path(path)
    removed = []
    for tmp in path.parent.glob(f".{path.name}{TEMP_INFIX}*"):
        writer = tmp.name[len(f".{path.name}{TEMP_INFIX}"):]
        host, _, pid = writer.rpartition("-")
        if not pid.isdigit() or host not in ("", _HOST) or _alive(int(pid)):
            continue
        _unlink_quietly(tmp)
        removed.append(tmp)
    return removed


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (one of another user counts as alive)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
