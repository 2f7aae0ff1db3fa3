"""The one gate for files: every file dataio reads from a user's tree or writes into an output folder opens here.

Reads (``open_input``, ``read_input``, ``open_input_fd``) take regular files only: a FIFO, socket or device is
refused without being waited on (``O_NONBLOCK``, then ``fstat`` on the open descriptor, whatever a listing
said), and so is a file of ``/proc`` or ``/sys`` (its size says 0 and ``/proc/self/pagemap`` reads 256 GiB:
no size check bounds it). Given the ``root`` of the tree they come from (a source folder), they follow no link
out of it: the resolved path must stay under the resolved root (links inside the tree are fine), so a caption
linked to a credentials file is never read. Whole reads stop one byte past their limit (``read_fd_at_most``).
Libraries that would open a path themselves get what the gate opened: pyarrow an mmap of a checked descriptor
(``map_input``: Arrow shards stay zero-copy) or a ``ParquetFile`` over a checked file (``open_parquet``).

Writes never go through a link: temp files, checkpoints, journals and shards are created new
(``O_CREAT | O_EXCL | O_NOFOLLOW``, whatever was there removed first, never opened), locks and logs are
opened ``O_NOFOLLOW`` and a link where they live is refused in one line (``refuse_link``). A library that can
only write to a path it opens (torch's trace export) writes in a folder the gate has just made
(``private_temp_path``).

Every refusal is an ``OSError`` whose message is the reason, one line, the same on every run: the packers
put it in ``rejected.jsonl`` beside the file's name, the CLI prints it.
"""

from __future__ import annotations

import errno
import hashlib
import mmap
import os
import socket
import stat
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO

from dataio.formats.errors import OutputError, UsageError

if TYPE_CHECKING:  # for the annotations only: pyarrow is imported where it is used
    import pyarrow as pa
    import pyarrow.parquet as pq

PathLike = str | bytes | Path
_CHUNK = 1 << 20
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
KERNEL_FOLDERS = ("/proc", "/sys")  # file systems whose "regular" files report no true size


# --- the read half ---------------------------------------------------------------------------------------------

class FileRefused(OSError):
    """A file the gate does not read; the message is the reason."""


class NotRegularFile(FileRefused):
    """A path names a FIFO, socket, device, folder or kernel file rather than a regular file."""


class FileTooLarge(FileRefused):
    """A file past its size limit; the message is the reason (sizes and the limit), the same on every run."""


class LinkLeavesTree(FileRefused):
    """A link that leads out of the tree the file was given in (a caption linked to ``~/.aws/credentials``)."""


def file_kind(mode: int) -> str:
    """What a non-regular file is, for a rejection reason."""
    kinds = ((stat.S_ISDIR, "folder"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"),
             (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"), (stat.S_ISLNK, "symlink"))
    return next((name for test, name in kinds if test(mode)), "special file")


@cache
def _kernel_devices() -> dict[int, str]:
    """``st_dev`` of /proc and /sys -> the folder: a file there is refused whatever ``stat`` says of it."""
    found = {}
    for folder in KERNEL_FOLDERS:
        try:
            found[os.stat(folder).st_dev] = folder
        except OSError:
            pass  # not mounted here: nothing of it to refuse
    return found


def _check_regular(fd: int) -> None:
    """``NotRegularFile`` unless the open ``fd`` is a regular file outside /proc and /sys."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise NotRegularFile(f"not a regular file: {file_kind(info.st_mode)}")
    folder = _kernel_devices().get(info.st_dev)
    if folder is not None:
        raise NotRegularFile(f"not a regular file: a kernel file of {folder} (its size, {info.st_size:,}, does not "
                             "bound what it reads)")


def _inside(path: PathLike, root: PathLike) -> bytes:
    """``path`` resolved, or ``LinkLeavesTree`` when a link takes it out of ``root`` (resolved too)."""
    real, real_root = os.path.realpath(os.fsencode(path)), os.path.realpath(os.fsencode(root))
    if os.path.commonpath([real, real_root]) != real_root:
        shown = os.fsdecode(real).encode("unicode_escape", "backslashreplace").decode("ascii")  # one line
        raise LinkLeavesTree(f"a link out of the source folder (to {shown}): not read")
    return real


def open_input_fd(path: PathLike, *, root: PathLike | None = None) -> int:
    """A read-only descriptor of the regular file ``path`` (in the tree ``root``, when given); ``FileRefused``
    for anything else, without blocking or reading it."""
    target = os.fsencode(path) if root is None else _inside(path, root)
    flags = os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC | (_NOFOLLOW if root is not None else 0)  # resolved: no link left
    fd = os.open(target, flags)
    try:
        _check_regular(fd)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_input(path: PathLike, *, root: PathLike | None = None) -> BinaryIO:
    """The regular file ``path`` open for binary reading, to hand to a library (tarfile, PIL, pyarrow, torch)."""
    return os.fdopen(open_input_fd(path, root=root), "rb")


def map_input(path: PathLike, *, root: PathLike | None = None) -> pa.BufferReader:
    """The regular file ``path`` memory-mapped read-only, as a pyarrow reader (for ``pa.ipc.open_file``).

    ``pa.memory_map(path)`` opens the path itself, so a FIFO given as a shard would block it and a link would be
    followed: the file is opened and checked here, and its descriptor mapped. The mapping is as fast as
    pyarrow's own (tables stay zero-copy views of the page cache); the arrays read from it keep it alive.
    """
    import pyarrow as pa  # lazy: only Arrow readers need it, and the gate stays stdlib for everyone else

    fd = open_input_fd(path, root=root)
    try:
        if os.fstat(fd).st_size == 0:  # mmap refuses an empty file: pyarrow then says it is no Arrow file
            return pa.BufferReader(b"")
        return pa.BufferReader(pa.py_buffer(mmap.mmap(fd, 0, access=mmap.ACCESS_READ)))
    finally:
        os.close(fd)  # the mapping holds the file on its own


def open_parquet(path: PathLike, *, root: PathLike | None = None) -> pq.ParquetFile:
    """The regular file ``path`` as a ``pq.ParquetFile`` read through a file the gate opened (pyarrow given a
    path would wait on a FIFO). The file closes when the reader is collected: pyarrow closes only files it
    opened itself, and one left to the garbage collector warns. Reads stay pyarrow's (footer, then row groups)."""
    import pyarrow.parquet as pq  # lazy, as in map_input

    source = open_input(path, root=root)
    try:
        reader = pq.ParquetFile(source)
    except BaseException:
        source.close()
        raise
    weakref.finalize(reader, source.close)
    return reader


def read_fd_at_most(fd: int, limit: int) -> bytes:
    """The bytes of the open file ``fd`` if they are at most ``limit``; ``FileTooLarge`` otherwise.

    A file's size is only a claim (a file being appended to grows while it is read, a pipe has no size): the
    size is checked first (a 50 GB sparse file is refused unread), and the read then stops one byte past the
    limit, the byte that tells a file of exactly ``limit`` bytes from a longer one.
    """
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


def read_input(path: PathLike, limit: int, *, root: PathLike | None = None) -> bytes:
    """The bytes of the regular file ``path`` (in the tree ``root``, when given), at most ``limit`` of them."""
    fd = open_input_fd(path, root=root)
    try:
        return read_fd_at_most(fd, limit)
    finally:
        os.close(fd)


def read_at_most(path: PathLike, limit: int) -> bytes:
    """The bytes of a file named by a flag (``--classes``, ``--mixture``, ``--tokenizer``, a manifest), at most
    ``limit``: a regular file only, as every input (a FIFO given there blocked the command for ever, and
    ``/dev/zero`` read up to the limit): ``NotRegularFile`` says which kind it is, without waiting on it."""
    return read_input(path, limit)


def read_kernel_text(path: str, limit: int = 1 << 20) -> str:
    """A file of /proc dataio reads for its own reports (``/proc/cpuinfo``), on purpose and bounded: the one read
    of a kernel file, whose path dataio itself names (never a user's)."""
    fd = os.open(path, os.O_RDONLY | _CLOEXEC)
    try:
        return read_fd_at_most(fd, limit).decode("utf-8", "replace")
    finally:
        os.close(fd)


def sha256_file(path: PathLike, chunk: int = _CHUNK) -> str:
    """Hex sha256 of a regular file, read in chunks."""
    digest = hashlib.sha256()
    with open_input(path) as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


# --- the write half --------------------------------------------------------------------------------------------

TEMP_INFIX = ".tmp-"  # .NAME.tmp-HOST-PID: the writer of a temp file, to tell a dead one's leftovers
HOST = socket.gethostname().replace("/", "_")
NO_FOLLOW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC


def create_new(path: PathLike) -> int:
    """A new file at ``path``, created by this call: a leftover file there (of this pid) is removed first, never
    opened; a link there (planted to a file of the user's) is refused in one line, its target untouched."""
    try:
        return os.open(path, NO_FOLLOW, 0o644)
    except FileExistsError:
        refuse_link(Path(os.fsdecode(path)), "a file it writes")
        os.unlink(path)
        return os.open(path, NO_FOLLOW, 0o644)


def open_new(path: PathLike) -> BinaryIO:
    """``create_new`` as a binary file object (a shard's temp file, handed to tarfile or pyarrow)."""
    return os.fdopen(create_new(path), "wb")


def write_new(path: PathLike, data: bytes) -> None:
    """Write ``data`` as the new file ``path`` (no temp file, no fsync: generated data, cheap to redo)."""
    with open_new(path) as f:
        f.write(data)


@contextmanager
def atomic_writer(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file that appears at ``path`` only once the block ends without error.

    It is written to a hidden temp file beside ``path``, fsynced and renamed, so a kill never leaves a
    half-written ``path``, and an exception removes the temp file; an OSError (disk full) is raised as
    ``OutputError`` naming ``path``. The rename replaces a link at ``path`` itself, never its target.
    """
    path = Path(path)
    refuse_link(path, "a file it writes")  # the rename would replace the link: say so rather than drop it
    tmp = path.with_name(f".{path.name}{TEMP_INFIX}{HOST}-{os.getpid()}")
    try:
        with os.fdopen(create_new(tmp), "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        unlink_quietly(tmp)
        if isinstance(e, OSError):  # disk full, quota, I/O error: one line naming the file
            raise OutputError(path, e) from None
        raise


@contextmanager
def private_temp_path(path: str | Path, what: str) -> Iterator[Path]:
    """A path for a library that writes only to a path it opens itself (torch's ``export_chrome_trace``), moved
    to ``path`` once the block ends without error.

    The path lies in a new folder beside ``path`` that this call creates (random name, mode 0700), so no link can
    have been planted there; the rename then replaces a link at ``path`` itself, never its target, and a link at
    ``path`` is refused up front (``refuse_link``) rather than silently dropped.
    """
    path = Path(path)
    refuse_link(path, what)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=f".{path.name}.private-") as private:
        written = Path(private) / path.name
        yield written
        os.replace(written, path)


def write_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file and a rename."""
    with atomic_writer(path) as f:
        f.write(data)


def unlink_quietly(path: Path) -> None:
    """Remove a temp file while handling another error: a second error here must not hide the first."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def refuse_link(path: Path, what: str) -> None:
    """A UsageError when ``path``, where dataio keeps ``what``, is a symbolic link: writing there would write
    where the link points (a file or folder of the user's, planted or left by mistake)."""
    if path.is_symlink():
        raise UsageError(f"{path} is a link (to {os.readlink(path)}), where dataio keeps {what}: remove it, "
                         "dataio writes nothing through links")


def _open_no_link(path: Path, flags: int, what: str) -> int:
    """``os.open`` with ``O_NOFOLLOW``; a link at ``path`` (checked, or swapped in since: ELOOP) a UsageError."""
    refuse_link(path, what)
    try:
        return os.open(path, flags | _NOFOLLOW | _CLOEXEC, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            refuse_link(path, what)
            raise UsageError(f"{path} is a link, where dataio keeps {what}: remove it, dataio writes nothing "
                             "through links") from None
        raise


def open_lock(path: Path, what: str) -> int:
    """A lock file's read-write descriptor, created if missing, never through a link."""
    return _open_no_link(path, os.O_RDWR | os.O_CREAT, what)


def open_append(path: Path, what: str) -> TextIO:
    """A text log (UTF-8, rows added at its end), never through a link."""
    return os.fdopen(_open_no_link(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, what), "a", newline="",
                     encoding="utf-8")


def fsync_file(path: PathLike) -> None:
    """Flush a file dataio wrote (a shard's temp file) to disk, opened without following a link."""
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
