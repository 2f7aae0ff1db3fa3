"""One JPEG decoded once into every view of it: the union of the views' boxes decoded by libjpeg-turbo, each view
cropped, resized and flipped from those pixels.

The views of a DINO recipe cover most of an image between them (two global crops of 32-100% of its area), so
their union is decoded once, as a region (``_jpeg_codec.decode_region``: rows and iMCU columns outside it are not
decoded), at the largest DCT reduction every view allows (``turbo_decode.dct_scale``: a 96 px local crop of a
small region needs full resolution, so on ImageNet-size photos it is 1), and each view is resized from it by the
image loader's own crop-and-resize (``_jpeg_codec.resize_rgbx``: pillow-simd's antialiased filter, mirrored for a
flip) straight into its slot. Decoding per view instead would entropy-decode each image ten times. Without the
extension (or for PNG and CMYK data) PIL decodes the image once and resizes each view from it.
"""

from __future__ import annotations

import io
import math

import numpy as np
from PIL import Image

from dataio.formats.images.pixel_modes import rgb
from dataio.images.table_size import check_size
from dataio.images.turbo_decode import (ANTIALIAS, JPEG_START, REGION_DECODE, RESIZE_IN_C, _buffer, _check_pixels,
                                        _clamped, _jpeg_codec, dct_scale, draft_size)
from dataio.pipeline.stage_times import NO_LAP

Box = tuple[float, float, float, float]


def decode_views(data: bytes, boxes: np.ndarray, flips: np.ndarray, outs: list[np.ndarray], *,
                 reduced_decode: bool = True, expect_size: tuple[int, int] | None = None, lap=NO_LAP) -> None:
    """Decode ``data`` once and write view ``v`` (``boxes[v]``, x0 y0 x1 y1 in the image's pixels, mirrored when
    ``flips[v]``) into ``outs[v]`` ((S, S, 3) uint8, C-contiguous). Raises OSError/ValueError (data errors) on
    bad bytes, a header past the pixel limit, or (``expect_size``) an image of another size than its table row's."""
    if REGION_DECODE and RESIZE_IN_C and data[:2] == JPEG_START:
        try:
            _region_views(data, boxes, flips, outs, reduced_decode, expect_size, lap)
            return
        except NotImplementedError:  # CMYK or YCCK: PIL converts those
            pass
    _whole_views(data, boxes, flips, outs, reduced_decode, expect_size, lap)


def _region_views(data: bytes, boxes: np.ndarray, flips: np.ndarray, outs: list[np.ndarray], reduced_decode: bool,
                  expect_size: tuple[int, int] | None, lap) -> None:
    width, height = _jpeg_codec.header(data)
    _check_pixels(width, height)
    check_size(width, height, expect_size)
    clamped = [_clamped(box, width, height) for box in boxes]
    sizes = [out.shape[0] for out in outs]
    scale = min(dct_scale(width, height, box, size, size) for box, size in zip(clamped, sizes, strict=True)) \
        if reduced_decode else 1
    if scale > 1:  # coordinates in the image decoded at 1/scale, as PIL's draft
        scaled_w, scaled_h = -(-width // scale), -(-height // scale)
        sx, sy = scaled_w / width, scaled_h / height
        width, height = scaled_w, scaled_h
        clamped = [(x0 * sx, y0 * sy, x1 * sx, y1 * sy) for x0, y0, x1, y1 in clamped]
    # the union of each view's box plus its resize filter's reach and one pixel of chroma context (region_of's)
    left, top, right, bottom = width, height, 0, 0
    for (x0, y0, x1, y1), size in zip(clamped, sizes, strict=True):
        margin_x = math.ceil(max(1.0, (x1 - x0) / size)) + 1
        margin_y = math.ceil(max(1.0, (y1 - y0) / size)) + 1
        left, top = min(left, max(0, int(x0) - margin_x)), min(top, max(0, int(y0) - margin_y))
        right, bottom = max(right, min(width, math.ceil(x1) + margin_x)), max(bottom, min(height, math.ceil(y1) + margin_y))
    buffer = _buffer(width * (bottom - top) * 4)
    with lap("decode"):
        span, rows, offset = _jpeg_codec.decode_region(data, left, top, right, bottom, scale, buffer)
    with lap("resize"):
        shift = offset - left  # the buffer starts ``offset`` columns left of ``left``
        for (x0, y0, x1, y1), flip, out in zip(clamped, flips.tolist(), outs, strict=True):
            crop = (x0 + shift, y0 - top, x1 + shift, y1 - top)
            _jpeg_codec.resize_rgbx(buffer, span, rows, crop, out, out.shape[1], out.shape[0], bool(flip))


def _whole_views(data: bytes, boxes: np.ndarray, flips: np.ndarray, outs: list[np.ndarray], reduced_decode: bool,
                 expect_size: tuple[int, int] | None, lap) -> None:
    try:
        image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as e:  # not an OSError: turn it into a data error
        raise ValueError(f"decompression bomb: {e}") from None
    width, height = image.size
    _check_pixels(width, height)
    check_size(width, height, expect_size)
    clamped = [_clamped(box, width, height) for box in boxes]
    needs = [draft_size(width, height, box, out.shape[1], out.shape[0]) for box, out in zip(clamped, outs, strict=True)]
    if reduced_decode and image.format == "JPEG" and all(need is not None for need in needs):
        image.draft("RGB", (max(n[0] for n in needs), max(n[1] for n in needs)))  # type: ignore[index]
        sx, sy = image.size[0] / width, image.size[1] / height
        clamped = [(x0 * sx, y0 * sy, x1 * sx, y1 * sy) for x0, y0, x1, y1 in clamped]
    with lap("decode"):
        image.load()  # once, for every view
    with lap("resize"):
        if image.mode != "RGB":
            image = rgb(image)  # 16-bit and float members (adopted as they are) scaled as packing scales them
        for box, flip, out in zip(clamped, flips.tolist(), outs, strict=True):
            view = image.resize((out.shape[1], out.shape[0]), ANTIALIAS, box=box)
            if flip:
                view = view.transpose(Image.FLIP_LEFT_RIGHT)
            out[...] = np.asarray(view)
