"""Leftover temp files of dead writers, and output errors; the writing itself is ``file_gate``'s (re-exported)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dataio.formats.errors import OutputError
from dataio.formats.file_gate import (HOST, NO_FOLLOW, TEMP_INFIX, atomic_writer, create_new, refuse_link,
                                      sha256_file, unlink_quietly, write_atomic)

__all__ = ["HOST", "NO_FOLLOW", "TEMP_INFIX", "atomic_writer", "create_new", "output_errors", "refuse_link",
           "remove_stale_temps", "sha256_file", "write_atomic"]
_HOST = HOST  # the name tests and older callers use


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
        if not pid.isdigit() or host not in ("", HOST) or _alive(int(pid)):
            continue
        unlink_quietly(tmp)
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


@contextmanager
def output_errors(path: str | Path) -> Iterator[None]:
    """OSErrors of the block (disk full, I/O error) become an ``OutputError`` naming ``path``."""
    try:
        yield
    except OSError as e:
        raise OutputError(path, e) from None
