"""A decoded image's size against the one its sample table records: a stale or tampered table is named, never
used to map targets.

Box and mask targets are mapped through crops drawn in the table's size, before
the decode (``detection_batches``); a table whose size is not the image's
(doubled, or from another file) would put every box in the wrong place with
nothing failing. The decoders already read the size from the header (turbo:
``_jpeg_codec.header``, PIL: ``Image.size``), so the check costs a comparison;
DALI's path reads the JPEG header alone (a few microseconds, no pixels).
"""

from __future__ import annotations

import io

from PIL import Image

try:
    from dataio.formats.jpeg import _jpeg_codec
except ImportError:  # built without libjpeg headers: PIL reads the header
    _jpeg_codec = None

JPEG_START = b"\xff\xd8"


class ImageSizeMismatch(ValueError):
    """The image's header gives another size than its sample table's row (a data error: the error policy
    applies)."""


def check_size(width: int, height: int, expected: tuple[int, int] | None) -> None:
    """Raise ``ImageSizeMismatch`` if ``expected`` (the table's width, height) is given and is not the image's."""
    if expected is not None and (width, height) != expected:
        raise ImageSizeMismatch(f"the sample table gives its size as {expected[0]}x{expected[1]}, "
                                f"the image is {width}x{height} (a stale or altered table)")


def header_size(data: bytes) -> tuple[int, int]:
    """(width, height) of an encoded image from its header alone (no pixels decoded); OSError/ValueError on bytes
    that are not an image."""
    if _jpeg_codec is not None and data[:2] == JPEG_START:
        return _jpeg_codec.header(data)
    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.size
    except Image.DecompressionBombError as e:  # not an OSError: a data error all the same
        raise ValueError(f"decompression bomb: {e}") from None
