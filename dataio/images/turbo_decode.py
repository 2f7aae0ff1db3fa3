"""Decode one JPEG with libjpeg-turbo straight into a batch slot, spending nothing on discarded pixels.

Two paths give the same pixels (tested bit-identical on the same libjpeg-turbo):

- **region** (default for baseline JPEGs): ``dataio.formats.jpeg._jpeg_codec``, a small C
  binding of libjpeg's partial decoding (``jpeg_skip_scanlines`` and
  ``jpeg_crop_scanline``), decodes only the crop's rows and iMCU columns, plus
  the resize filter's margin, into a per-thread RGBX buffer that PIL maps
  without a copy. A RandomResizedCrop keeps about half of an image, so this
  measured about 1.35x the whole-image path per image (bench/results).
  Files packed by dataio carry restart markers every 2 MCUs
  (formats/images/image_prepare.py), and the extension first cuts such a file down to
  the intervals around the box (dataio/jpeg_splice.c), so rows and columns
  outside it are not even entropy-decoded: another 1.4x per image.
- **whole** (fallback: PNG or CMYK data, or the extension not built): PIL
  decodes the whole image.

Either way the crop is resized to the output in one fused crop-and-resize, with
PIL's antialiased bilinear filter, and when the crop is downscaled 2x or more,
the JPEG is decoded at reduced size through DCT scaling, with PIL's ``draft``
rule. On the region path the extension's ``resize_rgbx`` does that resize and
writes the result into the batch slot as RGB, mirrored for a flip: pillow-simd's
own integers (``formats/jpeg/rgbx_resize.c``; used where they match the
installed PIL's, ``RESIZE_IN_C``), at 75 us against 180 for PIL's resize and
the packing of a 328 px centre crop to 224 px (2-core VM, AVX-512). Elsewhere
PIL's ``resize(box=...)`` does it and the extension's ``pack_rgbx`` packs it.
"""

from __future__ import annotations

import io
import math
import mmap
import threading

import numpy as np
from PIL import Image

from dataio.formats.fallback_log import warn_once
from dataio.formats.images.pixel_modes import rgb
from dataio.formats.limits import MAX_PIXELS  # as the converter's: a header claiming more is refused
from dataio.images.buffer_pool import scratch_buffer
from dataio.images.table_size import check_size
from dataio.pipeline.stage_times import NO_LAP

try:
    from dataio.formats.jpeg import _jpeg_codec
except ImportError:  # built from source without libjpeg headers: PIL decodes whole images
    _jpeg_codec = None

ANTIALIAS = Image.BILINEAR  # PIL's bilinear downscale is antialiased, as torchvision's on PIL images
FAST = Image.NEAREST
JPEG_START = b"\xff\xd8"
REGION_DECODE = _jpeg_codec is not None
# ImageLoader, train crops at 224 of ImageNet-size photos, one thread, plain pillow 13: 2,300 us of CPU per
# image without the extension against 1,490 with it (best of 8 epochs each, 2-core VM)
WITHOUT_CODEC = ("dataio.formats.jpeg._jpeg_codec is not built (no C compiler or libjpeg headers when torch-dataio was "
                 "installed): PIL decodes whole JPEGs, about 1.6x the CPU time per image; install gcc and the "
                 "libjpeg-turbo headers (Debian: libjpeg62-turbo-dev), then reinstall torch-dataio")
_scratch = threading.local()  # each decode thread's RGBX buffer
KEPT_BUFFER_BYTES = 32 << 20  # a 2900x2900 region; larger ones are freed after use
ROW_ALIGN = 32  # libjpeg-turbo streams rows past the cache when they start on this boundary (_buffer)


def decode_crop_into(
    data: bytes,
    box: np.ndarray,
    flip: bool,
    out: np.ndarray,
    *,
    fast_resize: bool = False,
    reduced_decode: bool = True,
    region_decode: bool = True,
    lap=NO_LAP,
    expect_size: tuple[int, int] | None = None,
) -> None:
    """Decode ``data``, resize ``box`` (x0, y0, x1, y1) to ``out`` (H, W, 3 uint8), flip if asked.

    With ``expect_size`` (the sample table's width, height), an image of another size raises
    ``table_size.ImageSizeMismatch`` from the header the decode reads anyway, before any pixel is decoded.

    ``lap`` (a ``stage_times.Lap``) times the entropy decode as ``decode`` and
    the crop-resize, flip and packing into the batch as ``resize``: the two
    are separate calls on both paths. Raises OSError/ValueError (data errors)
    on bad bytes.
    """
    resample = FAST if fast_resize else ANTIALIAS
    resized = None
    if region_decode and not REGION_DECODE:
        warn_once("jpeg-codec-decode", WITHOUT_CODEC)
    if region_decode and REGION_DECODE and data[:2] == JPEG_START:
        try:
            resized = _region_resized(data, box, out.shape[1], out.shape[0], resample, reduced_decode, lap,
                                      into=out if RESIZE_IN_C and out.flags.c_contiguous else None, flip=flip,
                                      expect_size=expect_size)
        except NotImplementedError:  # CMYK or YCCK: PIL converts those
            pass
        if resized is _WRITTEN:
            return
    if resized is None:
        resized = _whole_resized(data, box, out.shape[1], out.shape[0], resample, reduced_decode, lap, expect_size)
    with lap("resize"):
        if REGION_DECODE and out.flags.c_contiguous:
            # PIL's 4-byte pixels, packed to RGB and mirrored in one C pass into the batch: PIL's flip (40 us,
            # a new image) and RGB packing (28 us) measured 8% of a decode
            _jpeg_codec.pack_rgbx(_rgbx(resized), out, out.shape[1], out.shape[0], flip)
            return
        if flip:
            resized = resized.transpose(Image.FLIP_LEFT_RIGHT)
        out[...] = np.frombuffer(resized.tobytes("raw", "RGB"), dtype=np.uint8).reshape(out.shape)


def _rgbx(image: Image.Image) -> object:
    """``image``'s 4-byte pixels for ``pack_rgbx``: Pillow's Arrow export of them, without a copy, or a copy.

    ``tobytes("raw", "RGBX")`` copies the 224x224 result (36 us on the 2-core VM, 4% of an eval decode);
    the Arrow array capsule (Pillow >= 11.2) points at PIL's own memory (0.6 us). Images in more than one
    memory block (over 16 MB) are not exported: they are copied.
    """
    if ARROW_EXPORT:
        try:
            return image.im.__arrow_c_array__()
        except ValueError:  # several blocks
            pass
    return image.tobytes("raw", "RGBX")


def _arrow_export() -> bool:
    """Whether this Pillow exports an image's pixels as an Arrow array that ``pack_rgbx`` reads right."""
    if not REGION_DECODE:
        return False
    try:
        out = np.zeros((1, 2, 3), dtype=np.uint8)
        _jpeg_codec.pack_rgbx(Image.new("RGB", (2, 1), (1, 2, 3)).im.__arrow_c_array__(), out, 2, 1, False)
    except (AttributeError, TypeError, ValueError):
        return False
    return out.tolist() == [[[1, 2, 3], [1, 2, 3]]]


ARROW_EXPORT = _arrow_export()


def _resize_in_c() -> bool:
    """Whether the extension's ``resize_rgbx`` gives the installed PIL's pixels: pillow-simd's integer
    arithmetic is what it computes; plain Pillow rounds differently (its coefficients have 22 bits, not 16)
    and some pixels differ by one level, so there PIL keeps resizing. Checked on downscales, upscales, a crop
    of whole pixels and a mirrored box, once at import (about 2 ms)."""
    if not REGION_DECODE or not hasattr(_jpeg_codec, "resize_rgbx"):
        return False
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (61, 83, 4), dtype=np.uint8)
    image = Image.frombuffer("RGBX", (83, 61), pixels.tobytes(), "raw", "RGBX", 0, 1)
    for box, size, flip in (((3.3, 2.9, 80.1, 57.7), (24, 19), False), ((10.5, 4.25, 30.0, 20.0), (41, 33), True),
                            ((5.0, 7.0, 37.0, 39.0), (32, 32), False), ((0.0, 0.0, 83.0, 61.0), (29, 61), True)):
        want = np.asarray(image.resize(size, ANTIALIAS, box=box).convert("RGB"))
        got = np.empty((size[1], size[0], 3), dtype=np.uint8)
        _jpeg_codec.resize_rgbx(pixels.tobytes(), 83, 61, box, got, size[0], size[1], flip)
        if not np.array_equal(got, want[:, ::-1] if flip else want):
            return False
    return True


RESIZE_IN_C = _resize_in_c()


def _check_pixels(width: int, height: int) -> None:
    if width * height > MAX_PIXELS:  # a corrupted or hostile header: never allocate for it
        raise ValueError(f"header claims {width}x{height} pixels (> {MAX_PIXELS}): decompression bomb")


def _clamped(box: np.ndarray, width: int, height: int) -> tuple[float, float, float, float]:
    """``box`` inside the image, at least one pixel wide and high."""
    x0, y0, x1, y1 = (float(v) for v in box)
    x0, y0 = max(0.0, min(x0, width - 1.0)), max(0.0, min(y0, height - 1.0))
    return x0, y0, max(x0 + 1.0, min(x1, float(width))), max(y0 + 1.0, min(y1, float(height)))


def draft_size(width: int, height: int, box: tuple[float, ...], out_w: int, out_h: int) -> tuple[int, int] | None:
    """The smallest decode size in which the crop still has >= out pixels; None when under 2x (decode full size)."""
    x0, y0, x1, y1 = box
    need = (max(1, int(width * out_w / (x1 - x0))), max(1, int(height * out_h / (y1 - y0))))
    return need if need[0] * 2 <= width and need[1] * 2 <= height else None


def dct_scale(width: int, height: int, box: tuple[float, ...], out_w: int, out_h: int) -> int:
    """The JPEG DCT scale denominator (1, 2, 4 or 8) PIL's ``draft`` picks for ``draft_size``."""
    need = draft_size(width, height, box, out_w, out_h)
    if need is None:
        return 1
    most = min(width // need[0], height // need[1])
    return next(scale for scale in (8, 4, 2, 1) if most >= scale)


_WRITTEN = object()  # _region_resized's answer when it resized straight into the batch slot


def region_of(width: int, height: int, box: np.ndarray, out_w: int, out_h: int,
              reduced_decode: bool = True) -> tuple[int, int, tuple[int, int, int, int], tuple[float, ...]]:
    """What the region path decodes of a ``width`` x ``height`` JPEG for ``box``: the DCT scale denominator,
    the decoded image's width, the region (left, top, right, bottom) in its pixels, and the box in them."""
    x0, y0, x1, y1 = _clamped(box, width, height)
    scale = dct_scale(width, height, (x0, y0, x1, y1), out_w, out_h) if reduced_decode else 1
    if scale > 1:  # coordinates in the image decoded at 1/scale, as PIL's draft
        scaled_w, scaled_h = -(-width // scale), -(-height // scale)
        sx, sy = scaled_w / width, scaled_h / height
        width, height, x0, x1, y0, y1 = scaled_w, scaled_h, x0 * sx, x1 * sx, y0 * sy, y1 * sy
    # Decode the box plus the resize filter's reach (its support is the downscale factor) and
    # one pixel of chroma-upsampling context, so the result equals a whole-image decode's.
    margin_x = math.ceil(max(1.0, (x1 - x0) / out_w)) + 1
    margin_y = math.ceil(max(1.0, (y1 - y0) / out_h)) + 1
    left, top = max(0, int(x0) - margin_x), max(0, int(y0) - margin_y)
    right, bottom = min(width, math.ceil(x1) + margin_x), min(height, math.ceil(y1) + margin_y)
    return scale, width, (left, top, right, bottom), (x0, y0, x1, y1)


def _region_resized(data: bytes, box: np.ndarray, out_w: int, out_h: int, resample: int,
                    reduced_decode: bool, lap=NO_LAP, into: np.ndarray | None = None,
                    flip: bool = False, expect_size: tuple[int, int] | None = None) -> Image.Image | object:
    """The crop of ``data`` resized to ``out_w`` x ``out_h``: a PIL image, or with ``into`` (a C-contiguous
    slot, the antialiased filter) written there as RGB, mirrored if ``flip``, and ``_WRITTEN``."""
    width, height = _jpeg_codec.header(data)
    _check_pixels(width, height)
    check_size(width, height, expect_size)
    scale, width, (left, top, right, bottom), (x0, y0, x1, y1) = region_of(width, height, box, out_w, out_h,
                                                                           reduced_decode)
    buffer = _buffer(width * (bottom - top) * 4)
    with lap("decode"):
        span, rows, offset = _jpeg_codec.decode_region(data, left, top, right, bottom, scale, buffer)
    with lap("resize"):
        shift = offset - left  # the buffer starts ``offset`` columns left of ``left``
        crop = (x0 + shift, y0 - top, x1 + shift, y1 - top)
        if into is not None and resample == ANTIALIAS:
            _jpeg_codec.resize_rgbx(buffer, span, rows, crop, into, out_w, out_h, flip)
            return _WRITTEN
        region = Image.frombuffer("RGBX", (span, rows), buffer, "raw", "RGBX", 0, 1)
        return region.resize((out_w, out_h), resample, box=crop)


def _buffer(size: int) -> memoryview:
    """This thread's scratch buffer of at least ``size`` bytes (one for a huge image is not kept), starting 16
    bytes past a 32-byte boundary; wiped in a forked child rather than copied on write
    (``buffer_pool.scratch_buffer``).

    libjpeg-turbo's AVX2 colour conversion writes each output row with non-temporal stores when the row starts
    on a 32-byte boundary (jdcolext-avx2.asm), sending the region to memory instead of the cache the resize
    reads it from next; a page-aligned mapping did so for every row of a spliced region (whose rows are
    multiples of 32 pixels). 16 bytes past the boundary, the same decode of a ~50 KB photo's training crop
    took 403 us against 428 (32-byte aligned: 510, 64: 474; 2-core VM, per image, interleaved)."""
    buffer = getattr(_scratch, "buffer", None)
    if buffer is None or len(buffer) < size:
        buffer = _off_boundary(scratch_buffer(max(size, 1 << 20) + ROW_ALIGN))
        if size <= KEPT_BUFFER_BYTES:
            _scratch.buffer = buffer
    return buffer


def _off_boundary(buffer: bytearray | mmap.mmap) -> memoryview:
    """``buffer`` from its first byte that is 16 past a ``ROW_ALIGN`` boundary."""
    address = np.frombuffer(buffer, dtype=np.uint8, count=1).ctypes.data
    return memoryview(buffer)[(ROW_ALIGN // 2 - address) % ROW_ALIGN:]


def _whole_resized(data: bytes, box: np.ndarray, out_w: int, out_h: int, resample: int,
                   reduced_decode: bool, lap=NO_LAP, expect_size: tuple[int, int] | None = None) -> Image.Image:
    try:
        image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as e:  # not an OSError: turn it into a data error
        raise ValueError(f"decompression bomb: {e}") from None
    width, height = image.size
    _check_pixels(width, height)
    check_size(width, height, expect_size)
    x0, y0, x1, y1 = _clamped(box, width, height)
    need = draft_size(width, height, (x0, y0, x1, y1), out_w, out_h) if reduced_decode else None
    if need is not None and image.format == "JPEG":
        image.draft("RGB", need)
        sx, sy = image.size[0] / width, image.size[1] / height
        x0, x1, y0, y1 = x0 * sx, x1 * sx, y0 * sy, y1 * sy
    with lap("decode"):
        image.load()  # PIL decodes lazily: here rather than inside resize, so the two are timed apart
    with lap("resize"):
        if image.mode != "RGB":
            image = rgb(image)  # 16-bit and float members (adopted as they are) scaled as packing scales them
        return image.resize((out_w, out_h), resample, box=(x0, y0, x1, y1))


def decode_image(data: bytes, *, to_pil: bool = False) -> np.ndarray | Image.Image:
    """The whole image of ``data`` as (H, W, 3) uint8 RGB, or a PIL RGB image with ``to_pil``.

    A JPEG goes through the C codec whole (the region path with the image as
    its region, without the identity resize) and is packed straight from its
    RGBX rows: 667 images/s against PIL's 614 on ImageNet-size photos (the
    same pixels, tested). Other formats and CMYK JPEGs go through PIL. Raises
    OSError/ValueError (data errors) on bad bytes or a header past ``MAX_PIXELS``.
    """
    if REGION_DECODE and data[:2] == JPEG_START:
        try:
            width, height = _jpeg_codec.header(data)
            _check_pixels(width, height)
            buffer = _buffer(width * height * 4)
            span, rows, offset = _jpeg_codec.decode_region(data, 0, 0, width, height, 1, buffer)
            if (span, rows, offset) == (width, height, 0):
                rgbx = memoryview(buffer)[:width * height * 4]
                if to_pil:
                    return Image.frombytes("RGB", (width, height), rgbx, "raw", "RGBX")
                pixels = np.empty((height, width, 3), dtype=np.uint8)
                _jpeg_codec.pack_rgbx(rgbx, pixels, width, height, False)
                return pixels
        except NotImplementedError:  # CMYK or YCCK: PIL converts those
            pass
    try:
        image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as e:  # not an OSError: turn it into a data error
        raise ValueError(f"decompression bomb: {e}") from None
    with image:
        _check_pixels(*image.size)
        image = rgb(image)
    return image if to_pil else np.array(image)
