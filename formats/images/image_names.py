"""Which files of a source folder are images: those packed, and those that look like images but are not.

The files packed are torchvision's ``IMG_EXTENSIONS`` (what ``ImageFolder``
lists, compared lower-case), so a converted folder holds the samples
``ImageFolder`` would read, under the same labels. A file that looks like an
image but is outside that list (``.gif``, ``.jfif``, ``.heic``, ``.avif``, a
JPEG saved without an extension) is not packed either, so labels and sample
sets still agree with ``ImageFolder``; but it is listed in ``rejected.jsonl``
with the reason instead of vanishing without a word. "Looks like an image"
is, by name, an extension PIL registers a decoder for (less documents, data
and video formats) or a common format PIL lacks a plugin for; and, for a file
with no extension at all, the signature in its first bytes (one 16-byte read,
only for such files).
"""

from __future__ import annotations

import os
from functools import cache

from PIL import Image

from dataio.formats.file_gate import open_input_fd

# What ImageFolder accepts (torchvision's IMG_EXTENSIONS), compared lower-case; WebP only if PIL decodes it.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
# PIL registers these, but they are documents, scientific data, video or vector drawings, not pictures.
_NOT_PICTURES = frozenset((".pdf", ".eps", ".ps", ".h5", ".hdf", ".bufr", ".grib", ".fit", ".fits", ".mpeg", ".mpg",
                           ".wmf", ".emf", ".vst", ".vda", ".iim", ".im", ".gbr"))
# Pictures PIL may lack a plugin for: phone and camera formats, and the newer web formats.
_MORE_PICTURES = frozenset((".heic", ".heif", ".avif", ".jxl", ".svg", ".dng", ".cr2", ".cr3", ".nef", ".arw",
                            ".orf", ".rw2", ".raf", ".webp", ".jfif", ".jpe", ".gif"))
_SNIFF_BYTES = 16
# (offset, bytes, format): enough of each signature that a text or data file does not match it by chance.
_SIGNATURES = ((0, b"\xff\xd8\xff", "JPEG"), (0, b"\x89PNG\r\n\x1a\n", "PNG"), (0, b"GIF87a", "GIF"),
               (0, b"GIF89a", "GIF"), (0, b"II*\x00", "TIFF"), (0, b"MM\x00*", "TIFF"), (8, b"WEBP", "WebP"),
               (4, b"ftypheic", "HEIC"), (4, b"ftypheix", "HEIC"), (4, b"ftypmif1", "HEIF"),
               (4, b"ftypavif", "AVIF"))
_SUFFIX = {"JPEG": ".jpg", "PNG": ".png", "TIFF": ".tif", "WebP": ".webp"}  # formats ImageFolder lists


@cache
def picture_extensions() -> frozenset[str]:
    """Every extension that names a picture: PIL's registered ones and the others (PIL's plugins are loaded on
    the first call, not at import: ``dataio --help`` stays quick)."""
    Image.init()
    return (frozenset(Image.registered_extensions()) - _NOT_PICTURES) | _MORE_PICTURES


def is_packed_name(name: bytes) -> bool:
    """Whether ``name`` has one of ImageFolder's extensions (the files a conversion packs)."""
    return name.lower().endswith(tuple(e.encode() for e in IMAGE_EXTENSIONS))


def other_picture_extension(name: bytes) -> str | None:
    """The extension (``".gif"``) of a picture file that is not packed, or None."""
    base = name.lower()
    dot = base.rfind(b".")
    if dot <= 0 or is_packed_name(name):
        return None
    extension = base[dot:].decode("ascii", "replace")
    return extension if extension in picture_extensions() else None


def extension_reason(extension: str) -> str:
    """Why a ``.gif`` (say) is not packed, in ``rejected.jsonl``."""
    return (f"extension {extension} is not packed: torchvision's ImageFolder does not list it either (its "
            f"extensions: {' '.join(IMAGE_EXTENSIONS)}); convert the file to one of them to pack it")


def sniff_picture(path: bytes) -> str | None:
    """The format (``"JPEG"``) whose signature begins the regular file ``path``, or None.

    Opened with ``O_NONBLOCK`` and checked with ``fstat``: a FIFO swapped in for
    the file after the listing is neither waited on nor read.
    """
    try:
        fd = open_input_fd(path)  # the gate: regular files only, checked on the open descriptor
    except OSError:
        return None
    try:
        head = os.read(fd, _SNIFF_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return next((kind for offset, magic, kind in _SIGNATURES if head[offset:offset + len(magic)] == magic), None)


def no_extension_reason(kind: str) -> str:
    """Why a file without an extension whose first bytes are a ``kind`` image is not packed."""
    rename = f"; rename it to end in {_SUFFIX[kind]} to pack it" if kind in _SUFFIX else ""
    return (f"a {kind} image by its first bytes, without an extension: not packed (ImageFolder lists files by "
            f"extension and does not list it either){rename}")
