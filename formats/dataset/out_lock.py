"""One writer per output folder: ``OUT/.dataio.lock``, held with ``flock`` for the whole conversion.

A second converter on the same OUT is refused at once (non-blocking) instead
of interleaving shards with the first, and ``--overwrite`` deletes nothing
before the lock is held. The kernel drops the lock when its holder dies
(even by SIGKILL), so a rerun after a crash takes it again. The lock file is
removed when a conversion ends, so it never shows in the output; after
locking, the holder checks that the file it locked is still the one at the
path (another holder may have removed it between our open and our lock).
Forked workers close their copy of the descriptor, so a worker that
outlives a killed converter for a moment does not keep OUT locked. The
holder writes its pid and host into the file, and a refused process names
them (a requeued job may run on another node of a shared file system).
Used by the converters and by ``dataio train`` for its ``--out``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dataio.formats.errors import UsageError
from dataio.formats.file_gate import open_lock

LOCK_NAME = ".dataio.lock"


_HELD: set[int] = set()  # descriptors of the locks this process holds


def _close_held_in_child() -> None:
    """A forked worker must not keep the lock: an flock lives as long as any process has its descriptor open."""
    for fd in _HELD:
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_held_in_child)


class OutputBusy(UsageError):
    """Another process is writing the output folder."""


def _open_out(out: Path) -> int:
    """The lock file's descriptor, OUT created if needed; UsageError naming OUT if it cannot be."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"output {out} exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        return open_lock(out / LOCK_NAME, "its lock")  # a link there is refused in one line, never followed
    except OSError as e:
        raise UsageError(f"output folder {out} cannot be written: {e.strerror or e}") from None


def _holder(fd: int) -> str:
    """``pid 123 on host node7`` from the lock file, or ``it`` when the holder has not written it yet."""
    try:
        pid, _, host = os.pread(fd, 256, 0).decode("utf-8", "replace").strip().partition(" ")
    except OSError:
        return "it"
    return f"pid {pid} on host {host}" if pid.isdigit() and host.isprintable() and host else "it"


@contextmanager
def locked_output(out: Path) -> Iterator[None]:
    """Hold OUT's lock for the block; OutputBusy (one line) if another process holds it."""
    path = out / LOCK_NAME
    while True:
        fd = _open_out(out)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = _holder(fd)
            os.close(fd)
            if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                raise OutputBusy(f"output folder {out} is being written by another dataio process "
                                 f"({holder} holds {path}); wait for it, or choose another folder") from None
            raise UsageError(f"output folder {out} cannot be locked: {e.strerror or e}") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder removed it as we opened it: lock the new one
    _HELD.add(fd)
    try:  # who holds it, for the message of a refused process
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
    except OSError:  # a full disk: the refusal will name no holder
        pass
    try:
        yield
    finally:  # still ours (checked above): removing it is safe; a killed run leaves it, unlocked, for the rerun
        _HELD.discard(fd)
        path.unlink(missing_ok=True)
        os.close(fd)
