"""An encoded image's size from its header alone, with the decompression-bomb limit.

For indexing tars in place: a header read is microseconds, where decoding an ImageNet JPEG is
milliseconds (``dataio verify --deep`` decodes every image).
"""

from __future__ import annotations

import io

from PIL import Image, features

from dataio.formats.limits import MAX_PIXELS

try:
    from dataio.formats.jpeg._jpeg_codec import header as jpeg_header
except ImportError:  # built without libjpeg headers: PIL reads JPEG headers too
    jpeg_header = None


def image_size(data: bytes, max_pixels: int = MAX_PIXELS) -> tuple[int, int] | str:
    """``(width, height)``, or the reason the bytes are not an image this library reads."""
    try:
        if jpeg_header is not None and data[:2] == b"\xff\xd8":
            width, height = jpeg_header(data)
        elif data[:4] == b"RIFF" and data[8:12] == b"WEBP" and not features.check("webp"):
            return "WebP: this PIL build has no WebP decoder"
        else:
            with Image.open(io.BytesIO(data)) as image:
                if image.format not in ("JPEG", "PNG", "WEBP"):
                    return f"not a JPEG, PNG or WebP image ({image.format})"
                width, height = image.size
    except NotImplementedError:  # a CMYK/YCCK JPEG: PIL decodes those
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError) as e:
        return f"cannot read the image header ({type(e).__name__}: {e})"
    if width < 1 or height < 1 or width * height > max_pixels:
        return f"header claims {width}x{height} pixels (limit {max_pixels})"
    return width, height
