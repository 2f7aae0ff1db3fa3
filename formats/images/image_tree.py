"""Walking an ImageNet-layout source folder (``SRC/<class>/.../<image>``), safely on hostile trees.

The source tree is input and may be anything:

- Directory symlinks are followed, but every real directory (its
  ``(st_dev, st_ino)``) is walked once: a link back to an ancestor (a cycle)
  or a second link to a folder already walked is listed as rejected instead,
  so the walk always ends and each image is packed once.
- Only regular files are read. A FIFO, socket or device with an image name
  (or a symlink to one, e.g. to ``/dev/zero``) is rejected with its kind; it
  is never opened for reading by the walk, and ``read_regular_file`` opens
  with ``O_NONBLOCK`` and checks ``fstat`` before reading, so a file swapped
  for a FIFO after the walk cannot hang the converter either.
- A file is read only up to a size limit (``--max-file-size``, ``limits.MAX_FILE_BYTES``):
  a 50 GB sparse file is rejected with its size unread, a file that reads on
  past its size (in ``/proc``, or growing) after one byte past the limit.
- A folder that cannot be listed is rejected with its errno name
  (``cannot list folder: EACCES (Permission denied)``); nothing vanishes
  silently, so ``--strict`` sees it.
- Names are taken as bytes. Paths are stored as text (the sample table,
  ``.json`` members, ``rejected.jsonl``) with ``escape_path``: valid UTF-8 is
  kept, except that each byte that is not valid UTF-8, and each control
  character or line separator, is written ``\\xHH`` and a backslash
  ``\\\\``. That is lossless and unambiguous (``unescape_path`` gives the
  bytes back) and keeps every stored path on one line.
- WebP files are accepted only when this PIL build decodes WebP; otherwise
  they are rejected with that reason, never silently skipped.
- Files are packed by ImageFolder's extensions; every other file that looks
  like an image (``.gif``, ``.heic``, a JPEG without an extension) is listed
  with its reason (``image_names``). Hidden folders and files are not packed,
  and each that holds images is listed with what ImageFolder would make of it;
  so is a folder at the top holding an earlier dataio output
  (``skipped_folders``). Labels so agree with ImageFolder's, or the line says
  how they differ.

The walk is deterministic: classes and names are sorted by their bytes (for
valid UTF-8 the same order as ``sorted`` of the names, as ImageFolder does),
each folder's files before its subfolders, so the converter's journal
fingerprint, shard contents and ``rejected.jsonl`` are the same on every run.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from PIL import features

from dataio.formats.file_gate import NotRegularFile, file_kind, read_input  # noqa: F401  (imported from here)
from dataio.formats.errors import UsageError
from dataio.formats.images.image_names import IMAGE_EXTENSIONS  # noqa: F401  (imported from here by dataio.dataloader)
from dataio.formats.images.image_names import (extension_reason, is_packed_name, no_extension_reason,
                                               other_picture_extension, sniff_picture)
from dataio.formats.images.skipped_folders import (hidden_class_reason, hidden_file_reason, hidden_in_class_reason,
                                                   images_under, output_folder_reason, output_marker,
                                                   stray_image_reason)
from dataio.formats.limits import MAX_FILE_BYTES

NO_WEBP = "WebP: this PIL build has no WebP decoder"


def unsupported_extensions() -> dict[str, str]:
    """Image extensions this PIL build cannot decode -> why (rejected with that reason)."""
    return {} if features.check("webp") else {".webp": NO_WEBP}


@dataclass(frozen=True)
class ImageTree:
    """What the walk found: classes, (path, label) of the files to pack, and (path, reason) of the rejected."""

    classes: list[str]
    files: list[tuple[str, int]]
    rejected: list[tuple[str, str]] = field(default_factory=list)


def _breaks_lines(code: int) -> bool:
    """C0 and C1 control characters, DEL, and U+2028/U+2029: what could end a line of a listing or log."""
    return code < 0x20 or 0x7F <= code <= 0x9F or code in (0x2028, 0x2029)


def escape_path(raw: bytes) -> str:
    """Path bytes -> one line of valid UTF-8 text, losslessly (``unescape_path`` inverts it).

    Each byte that is not valid UTF-8, and each byte of a control character
    or line separator, is written ``\\xHH`` (lower-case hex); a backslash is
    written ``\\\\``; everything else is kept.
    """
    text = raw.decode("utf-8", "surrogateescape")
    if text.isprintable() and "\\" not in text:
        return text  # the usual case: nothing to escape
    out = []
    for char in text:
        code = ord(char)
        if char == "\\":
            out.append("\\\\")
        elif 0xDC80 <= code <= 0xDCFF:  # a byte that is not valid UTF-8 (surrogateescape)
            out.append(f"\\x{code - 0xDC00:02x}")
        elif _breaks_lines(code):
            out.append("".join(f"\\x{byte:02x}" for byte in char.encode("utf-8")))
        else:
            out.append(char)
    return "".join(out)


_ESCAPE = re.compile(r"\\(\\|x[0-9a-f]{2})")


def unescape_path(text: str) -> bytes:
    """Inverse of ``escape_path``; raises ValueError on a backslash that is not an escape."""
    out, position = bytearray(), 0
    for match in _ESCAPE.finditer(text):
        plain = text[position:match.start()]
        if "\\" in plain:
            raise ValueError(f"{text!r}: a backslash that is not an escape")
        out += plain.encode("utf-8")
        escape = match.group(1)
        out += b"\\" if escape == "\\" else bytes([int(escape[1:], 16)])
        position = match.end()
    if "\\" in text[position:]:
        raise ValueError(f"{text!r}: a backslash that is not an escape")
    return bytes(out + text[position:].encode("utf-8"))


def source_path(src: str | Path, relative: str) -> bytes:
    """The file a stored relative path names under ``src``; ValueError if the path leaves ``src``."""
    if not isinstance(relative, str):
        raise ValueError(f"path {relative!r} is not text")
    raw = unescape_path(relative)
    parts = raw.split(b"/")
    if raw.startswith(b"/") or b".." in parts or b"\x00" in raw or not raw:
        raise ValueError(f"path {relative!r} is not inside the source folder")
    return os.path.join(os.fsencode(src), raw)


def errno_text(error: OSError) -> str:
    """``EACCES (Permission denied)``: the errno name and its message, the same on every run."""
    code = error.errno
    if code is None:
        return type(error).__name__
    return f"{errno.errorcode.get(code, f'errno {code}')} ({os.strerror(code)})"


def read_regular_file(path: str | bytes | Path, limit: int = MAX_FILE_BYTES, *,
                      root: str | bytes | Path | None = None) -> bytes:
    """The bytes of a regular file, through the gate (``file_gate.read_input``): ``NotRegularFile`` for a FIFO,
    device or kernel file, unread; ``LinkLeavesTree`` for a link out of the source folder ``root``;
    ``FileTooLarge`` past ``limit`` bytes, after reading at most one byte more."""
    return read_input(path, limit, root=root)


class _Walk:
    """One walk of a source tree: the folders seen (by inode) and what was found."""

    def __init__(self, src: bytes) -> None:
        self.src = src
        self.unsupported = unsupported_extensions()
        self.seen: dict[tuple[int, int], bytes] = {}  # (st_dev, st_ino) -> relative path first walked as
        self.files: list[tuple[str, int]] = []
        self.rejected: list[tuple[str, str]] = []

    def reject(self, relative: bytes, reason: str) -> None:
        self.rejected.append((escape_path(relative), reason))

    def walk_class(self, relative: bytes, label: int, root_id: tuple[int, int]) -> None:
        """Every image under the class folder ``relative``: each folder's files, then its subfolders, sorted."""
        stack: list[tuple[bytes, tuple[tuple[int, int], ...]]] = [(relative, (root_id,))]
        while stack:
            folder, ancestors = stack.pop()
            identity = self._enter(folder, ancestors)
            if identity is None:
                continue
            try:
                with os.scandir(os.path.join(self.src, folder)) as listing:
                    entries = sorted(listing, key=lambda e: e.name)
            except OSError as e:
                self.reject(folder, f"cannot list folder: {errno_text(e)}")
                continue
            subfolders = []
            for entry in entries:
                path = os.path.join(folder, entry.name)
                if entry.name.startswith(b"."):
                    self._hidden(entry, path, relative)
                    continue
                kind = self._kind(entry, path)
                if kind == "folder":
                    subfolders.append(path)
                elif kind == "file":
                    self.files.append((escape_path(path), label))
            stack.extend((path, ancestors + (identity,)) for path in reversed(subfolders))

    def _enter(self, folder: bytes, ancestors: tuple[tuple[int, int], ...]) -> tuple[int, int] | None:
        """The folder's (st_dev, st_ino), marked walked; None (and rejected) if it is a loop back to an
        ancestor, was walked before under another path, or cannot be looked at."""
        try:
            info = os.stat(os.path.join(self.src, folder))
        except OSError as e:
            self.reject(folder, f"cannot open folder: {errno_text(e)}")
            return None
        identity = (info.st_dev, info.st_ino)
        first = self.seen.get(identity)
        if first is not None:
            what = "symlink loop back to" if identity in ancestors else "folder already walked as"
            self.reject(folder, f"{what} {escape_path(first) if first else '.'}")
            return None
        self.seen[identity] = folder
        return identity

    def _hidden(self, entry: os.DirEntry, path: bytes, class_folder: bytes) -> None:
        """A hidden entry of a class folder is not packed; one that ImageFolder would read is listed."""
        try:
            if entry.is_dir(follow_symlinks=False):
                images = images_under(os.path.join(self.src, path))
                if images:
                    self.reject(path, hidden_in_class_reason(images, escape_path(class_folder)))
            elif is_packed_name(entry.name):
                self.reject(path, hidden_file_reason(escape_path(class_folder)))
        except OSError:
            pass  # gone since the listing, or not to be looked at: not packed either way

    def _not_packed(self, entry: os.DirEntry, path: bytes) -> None:
        """A regular file without one of ImageFolder's extensions: listed if it looks like an image anyway."""
        extension = other_picture_extension(entry.name)
        if extension is not None:
            self.reject(path, extension_reason(extension))
        elif b"." not in entry.name and (kind := sniff_picture(os.path.join(self.src, path))) is not None:
            self.reject(path, no_extension_reason(kind))

    def _kind(self, entry: os.DirEntry, path: bytes) -> str | None:
        """"folder", "file" (a regular file with an image name) or None; rejects what looks like an image
        but is not a regular file, cannot be looked at, or cannot be decoded by this PIL build."""
        image_name = is_packed_name(entry.name)
        try:
            if not entry.is_symlink() and entry.is_file(follow_symlinks=False):
                mode = stat.S_IFREG  # the usual case, known from the listing without a stat
            else:
                mode = entry.stat(follow_symlinks=True).st_mode
        except OSError as e:
            if image_name:
                self.reject(path, f"cannot stat: {errno_text(e)}")
            return None  # a broken link without an image name: not an image, as before
        if stat.S_ISDIR(mode):
            return "folder"
        if not image_name:
            if stat.S_ISREG(mode):
                self._not_packed(entry, path)
            return None
        if not stat.S_ISREG(mode):
            self.reject(path, f"not a regular file: {file_kind(mode)}")
            return None
        unsupported = next((why for ext, why in self.unsupported.items() if entry.name.lower().endswith(ext.encode())),
                           None)
        if unsupported:
            self.reject(path, unsupported)
            return None
        return "file"


def walk_image_tree(src: str | Path) -> ImageTree:
    """Classes (sorted folder names, as ImageFolder), the files to pack, and the rejected paths with reasons."""
    root = os.fsencode(src)
    try:
        info = os.stat(root)
        if not stat.S_ISDIR(info.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "not a folder")
        with os.scandir(root) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        raise UsageError(f"source folder {src} does not exist or is not a folder") from None
    except OSError as e:
        raise UsageError(f"cannot list source folder {src}: {errno_text(e)}") from None
    walk = _Walk(root)
    walk.seen[(info.st_dev, info.st_ino)] = b""
    class_folders = _class_folders(walk, entries)
    if not class_folders:
        raise UsageError(f"source folder {src} has no class subfolders (expected SRC/<class>/<image>)")
    for label, name in enumerate(class_folders):
        walk.walk_class(name, label, (info.st_dev, info.st_ino))
    return ImageTree([escape_path(name) for name in class_folders], walk.files, sorted(walk.rejected))


def _class_folders(walk: _Walk, entries: list[os.DirEntry]) -> list[bytes]:
    """The class folders among the top entries (sorted); hidden folders holding images, folders holding a dataio
    output and images outside every class folder are listed in ``walk.rejected``."""
    every_folder, folders = [], []  # ImageFolder's classes (every folder at the top), and dataio's
    for entry in entries:
        try:
            is_folder = entry.is_dir(follow_symlinks=True)
        except OSError:
            continue
        if not is_folder:
            if is_packed_name(entry.name):
                walk.reject(entry.name, stray_image_reason())
            continue
        every_folder.append(entry.name)
        if entry.name.startswith(b"."):
            continue
        marker = output_marker(os.path.join(walk.src, entry.name))
        if marker is not None:
            walk.reject(entry.name, output_folder_reason(marker))
        else:
            folders.append(entry.name)
    for position, name in enumerate(every_folder):
        if name.startswith(b".") and (images := images_under(os.path.join(walk.src, name))):
            walk.reject(name, hidden_class_reason(images, position, sum(other > name for other in folders)))
    return folders


def scan_image_folder(src: str | Path) -> tuple[list[str], list[tuple[str, int]]]:
    """Classes and (relative path, label) pairs, as ImageFolder lists them (see ``walk_image_tree``)."""
    tree = walk_image_tree(src)
    return tree.classes, tree.files
