"""Validate one source image at pack time and turn it into clean RGB JPEG bytes.

Real ImageNet has CMYK and grayscale JPEGs, PNGs named ``.JPEG`` and EXIF
rotations: these are converted, not dropped. Files that do not decode are
rejected with a reason. Clean RGB JPEGs that need no change are kept pixel for
pixel (no generation loss).

Every JPEG written is then rewritten losslessly (its DCT coefficients as they
are, as jpegtran does) with a restart marker every few MCUs and optimised
Huffman tables (``dataio.formats.jpeg._jpeg_codec.add_restart_markers``): the reader can
then cut a file down to the part a crop needs before decoding it
(``dataio/jpeg_splice.c``), and any other JPEG reader decodes the same pixels
as before, no slower (bench/results). Metadata segments (EXIF, ICC profiles,
comments) are not copied: no decoder here applies them, and a clean file's EXIF
orientation is already 1. The files come out about as large as before (+0.5%
on the demo images with the default 2 MCUs). With
``restart_interval=0``, or without the C extension, clean JPEGs are kept byte
for byte.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageOps

from dataio.formats.errors import ConfigError
from dataio.formats.images.pixel_modes import to_8bit, wide
from dataio.formats.limits import MAX_FILE_BYTES, MAX_PIXELS
from dataio.formats.sizes import parse_size

try:
    from dataio.formats.jpeg._jpeg_codec import CorruptJPEGError, add_restart_markers, check as check_jpeg_scans
except ImportError:  # built without libjpeg headers: JPEGs are written as they are, and not checked
    add_restart_markers = check_jpeg_scans = None

    class CorruptJPEGError(ValueError):  # type: ignore[no-redef]
        """Never raised without the extension."""

WITHOUT_CODEC = ("dataio.formats.jpeg._jpeg_codec is not built (no C compiler or libjpeg headers when torch-dataio was "
                 "installed): JPEGs are packed as they are, without restart markers (the loader then decodes "
                 "each file up to its crop's last row instead of cutting it to the crop), and damaged JPEG data is "
                 "not detected; install gcc and the libjpeg-turbo headers (Debian: libjpeg62-turbo-dev), then "
                 "reinstall torch-dataio")

EXIF_ORIENTATION = 0x0112
# Quality used when a file must be re-encoded (format or colour conversion)
# and the user asked for no particular quality.
CONVERSION_QUALITY = 95
# Most MCUs per restart interval: 2 MCUs (32 pixels of a 4:2:0 image) is the column step at which a
# crop can be cut out; 1 measured no faster and +2% larger, 4 5% slower to decode.
RESTART_INTERVAL = 2


@dataclass(frozen=True, kw_only=True)
class ImagePrepareConfig:
    """Pack-time image options: downscale, re-encode quality, restart markers, decompression-bomb and file size
    limits."""

    max_side: int | None = None  # downscale so the longer side is at most this
    quality: int | None = None  # re-encode every image at this JPEG quality
    max_pixels: int = MAX_PIXELS
    max_file_size: int | str = MAX_FILE_BYTES  # bytes of a source file (or a Parquet row's image), or "500MB"
    restart_interval: int = RESTART_INTERVAL  # most MCUs between JPEG restart markers; 0: none

    def __post_init__(self) -> None:
        if self.max_side is not None and self.max_side < 8:
            raise ValueError(f"max_side must be >= 8, got {self.max_side}")
        if self.quality is not None and not 1 <= self.quality <= 100:
            raise ValueError(f"quality must be in 1..100, got {self.quality}")
        if self.max_pixels < 1:
            raise ValueError("max_pixels must be positive")
        try:
            size = None if isinstance(self.max_file_size, bool) else parse_size(self.max_file_size)
        except ValueError:
            size = None
        if not isinstance(size, int) or size < 1:
            raise ConfigError(f"{{0}} must be a positive number of bytes (e.g. 500MB), got {self.max_file_size!r:.40}",
                              "max_file_size")
        object.__setattr__(self, "max_file_size", size)
        if not 0 <= self.restart_interval <= 65535:
            raise ValueError(f"restart_interval must be in 0..65535, got {self.restart_interval}")


@dataclass(frozen=True)
class PreparedImage:
    """Clean RGB JPEG bytes and their size."""

    jpeg: bytes
    width: int
    height: int
    converted: bool  # re-encoded rather than kept as is
    beside: Any = None  # what its kind read beside the image (packing_kind.Beside: a pair's caption)


@dataclass(frozen=True)
class Rejection:
    """Why a source file was not packed."""

    reason: str


def prepare_image(data: bytes, config: ImagePrepareConfig) -> PreparedImage | Rejection:
    """Decode ``data`` fully, fix colour mode and orientation, re-encode if needed."""
    if not data:
        return Rejection("empty file")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            width, height = image.size
            if width * height > config.max_pixels:
                return Rejection(
                    f"decompression bomb: header claims {width}x{height} = {width * height} pixels "
                    f"(limit {config.max_pixels})"
                )
            source_format = image.format
            orientation = image.getexif().get(EXIF_ORIENTATION, 1)
            image.load()
    except Image.DecompressionBombError as e:
        return Rejection(f"decompression bomb: {e}")
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombWarning) as e:
        return Rejection(f"cannot decode: {type(e).__name__}: {e}")
    needs_encode = source_format != "JPEG" or image.mode != "RGB" or orientation != 1
    needs_encode |= config.quality is not None
    resize = config.max_side is not None and max(image.size) > config.max_side
    if source_format == "JPEG" and (needs_encode or resize or not _rewrites(config)):
        damage = _jpeg_damage(data)  # a file kept as is is checked by its rewrite below, for free
        if damage is not None:
            return damage
    if orientation != 1:
        image = ImageOps.exif_transpose(image)
    if image.mode != "RGB":
        image = _to_rgb(image)
    if resize:
        scale = config.max_side / max(image.size)
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size, Image.LANCZOS)
        needs_encode = True
    if not needs_encode:
        try:
            return PreparedImage(_with_restarts(data, config), image.width, image.height, converted=False)
        except CorruptJPEGError as e:
            return Rejection(f"damaged JPEG data: {_reason(e)}")
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=config.quality or CONVERSION_QUALITY)
    return PreparedImage(_with_restarts(out.getvalue(), config), image.width, image.height, converted=True)


def _rewrites(config: ImagePrepareConfig) -> bool:
    """Whether JPEGs are rewritten with restart markers (which entropy-decodes every scan)."""
    return bool(config.restart_interval) and add_restart_markers is not None


def _jpeg_damage(data: bytes) -> Rejection | None:
    """A rejection if libjpeg finds the entropy-coded data damaged.

    PIL decodes such files without a word (libjpeg only warns, and fills what it lost with grey), so
    a truncated or bit-flipped photo would be packed as a silently wrong image. The check
    entropy-decodes every scan (0.7 ms for a 57 KB 500x375 JPEG, 15% of preparing it).
    """
    if check_jpeg_scans is None:
        return None
    try:
        check_jpeg_scans(data)
    except CorruptJPEGError as e:
        return Rejection(f"damaged JPEG data: {_reason(e)}")
    except ValueError:  # not libjpeg's kind of JPEG (12-bit, arithmetic coding...): PIL decoded it, trust PIL
        return None
    return None


def _reason(error: CorruptJPEGError) -> str:
    return str(error).removeprefix("JPEG decode failed: damaged data: ")


def _with_restarts(jpeg: bytes, config: ImagePrepareConfig) -> bytes:
    """``jpeg`` rewritten losslessly with restart markers; as it is if that is off, unavailable or fails.

    Raises CorruptJPEGError if the data is damaged (the rewrite entropy-decodes every scan).
    """
    if not _rewrites(config):
        return jpeg
    try:
        return add_restart_markers(jpeg, config.restart_interval)
    except CorruptJPEGError:
        raise
    except ValueError:  # libjpeg cannot transcode what PIL decoded (e.g. 12-bit): keep the original
        return jpeg


def _to_rgb(image: Image.Image) -> Image.Image:
    """Convert any mode to RGB; transparency is composited on white, 16-bit and float data scaled
    (``pixel_modes.to_8bit``)."""
    if wide(image):
        image = to_8bit(image)
    if image.mode in ("RGBA", "LA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGB", rgba.size, (255, 255, 255))
        background.paste(rgba, mask=rgba.getchannel("A"))
        return background
    return image.convert("RGB")

