"""The decode's output rows and libjpeg-turbo's non-temporal stores (formats/jpeg/_jpeg_codec.c STREAMED_ROWS).

libjpeg-turbo's AVX2 colour conversion streams a row that starts on a 32-byte boundary past the cache; the
extension decodes such rows into an off-boundary row and copies them, and the decode threads' scratch buffer
starts 16 bytes past a boundary (turbo_decode._buffer). Both are about speed only: the pixels must be the same
wherever the caller's buffer starts, for every width (a width that is not a multiple of 8 pixels makes rows
alternate between on and off the boundary), spliced or not, at every DCT scale.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from dataio.images import turbo_decode
from dataio.images.turbo_decode import REGION_DECODE

pytestmark = pytest.mark.skipif(not REGION_DECODE, reason="dataio.formats.jpeg._jpeg_codec not built")
from dataio.formats.jpeg import _jpeg_codec  # noqa: E402  (after the skip mark: absent when not built)


def address(buffer: object) -> int:
    return np.frombuffer(buffer, dtype=np.uint8, count=1).ctypes.data


def jpeg(width: int, height: int, seed: int, restart: bool) -> bytes:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (height // 8 + 1, width // 8 + 1, 3), dtype=np.uint8)
    image = Image.fromarray(pixels).resize((width, height), Image.BILINEAR)
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=90)
    return _jpeg_codec.add_restart_markers(out.getvalue(), 2) if restart else out.getvalue()


@pytest.mark.parametrize("width", [333, 500, 96, 17])
def test_the_pixels_do_not_depend_on_where_the_buffer_starts(width):
    backing = bytearray((1 << 20) + 64)
    base = (-address(backing)) % 64  # backing[base:] starts on a 64-byte boundary
    for restart in (False, True):
        data = jpeg(width, 61, width, restart)
        for denom in (1, 2):
            scaled_w, scaled_h = -(-width // denom), -(-61 // denom)
            box = (1, 3, scaled_w - 1, scaled_h - 2)
            want = None
            for offset in range(0, 64, 4):
                view = memoryview(backing)[base + offset:]
                assert address(view) % 32 == offset % 32
                span, rows, left = _jpeg_codec.decode_region(data, *box, denom, view, restart)
                got = np.frombuffer(view, np.uint8, span * rows * 4).reshape(rows, span, 4)
                got = got[:, left:left + box[2] - box[0]].copy()
                if want is None:
                    want = got
                np.testing.assert_array_equal(got, want, err_msg=f"width {width} 1/{denom} offset {offset}")


def test_the_scratch_buffer_starts_sixteen_bytes_past_a_boundary():
    assert address(turbo_decode._buffer(1000)) % turbo_decode.ROW_ALIGN == turbo_decode.ROW_ALIGN // 2
    big = turbo_decode._buffer(3 << 20)  # grown past the first one: a new mapping, the same rule
    assert address(big) % turbo_decode.ROW_ALIGN == turbo_decode.ROW_ALIGN // 2 and len(big) >= 3 << 20


def test_a_whole_image_decode_from_an_aligned_buffer_is_pils():
    data = jpeg(203, 157, 3, restart=False)  # 203 px: rows 812 bytes apart, every 8th on a boundary
    backing = bytearray(203 * 157 * 4 + 64)
    view = memoryview(backing)[(-address(backing)) % 32:]
    span, rows, left = _jpeg_codec.decode_region(data, 0, 0, 203, 157, 1, view)
    got = np.frombuffer(view, np.uint8, span * rows * 4).reshape(rows, span, 4)[:, :, :3]
    np.testing.assert_array_equal(got, np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))
