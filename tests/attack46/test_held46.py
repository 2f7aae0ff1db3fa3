"""Attacks on the bounce row, the scratch buffer's offset and the crop-resize's coefficients that held (issue 46).

decode_region into caller buffers of every kind (read-only, a byte short, non-contiguous, numpy arrays at offsets
on and off the 32-byte boundary), images 1 pixel wide to 65500 wide, progressive; damaged data that fails after the
bounce row was allocated, then a good decode into the same buffer; threads decoding at once; the decode threads'
scratch buffer in a forked child and past KEPT_BUFFER_BYTES; the PIL fallback of the crop-resize (RESIZE_IN_C off)
giving the C path's pixels; resize_rgbx at every tier equal to PIL's on odd boxes, upscales and 1-pixel outputs.
"""

from __future__ import annotations

import io
import os
import threading

import numpy as np
import pytest
from PIL import Image

from dataio.images import turbo_decode
from dataio.images.turbo_decode import REGION_DECODE

pytestmark = pytest.mark.skipif(not REGION_DECODE, reason="dataio.formats.jpeg._jpeg_codec not built")
from dataio.formats.jpeg import _jpeg_codec  # noqa: E402  (after the skip mark: absent when not built)


def address(buffer: object) -> int:
    return np.frombuffer(buffer, dtype=np.uint8, count=1).ctypes.data


def jpeg(width: int, height: int, seed: int, **options) -> bytes:
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (height // 4 + 1, width // 4 + 1, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(small).resize((width, height), Image.BILINEAR).save(out, "JPEG", quality=85, **options)
    return out.getvalue()


def pil(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


@pytest.mark.parametrize("width, height, options", [(1, 40, {}), (2, 3, {}), (9000, 24, {}), (65500, 9, {}),
                                                    (257, 100, {"progressive": True}), (203, 157, {"subsampling": 0})])
def test_whole_images_into_numpy_arrays_on_and_off_the_boundary(width, height, options):
    data = jpeg(width, height, width, **options)
    want = pil(data)
    backing = np.zeros(width * height * 4 + 64, np.uint8)
    base = (-address(backing)) % 32
    for offset in (0, 16, 4):
        out = backing[base + offset:base + offset + width * height * 4]
        assert _jpeg_codec.decode_region(data, 0, 0, width, height, 1, out) == (width, height, 0)
        np.testing.assert_array_equal(out.reshape(height, width, 4)[:, :, :3], want)
        with pytest.raises(ValueError, match="too small"):
            _jpeg_codec.decode_region(data, 0, 0, width, height, 1, out[:-1])


def test_buffers_that_cannot_be_written_are_refused():
    data = jpeg(16, 16, 1)
    for bad in (bytes(4096), memoryview(bytearray(8192))[::2], np.zeros((64, 128), np.uint8)[:, ::2]):
        with pytest.raises(TypeError):
            _jpeg_codec.decode_region(data, 0, 0, 16, 16, 1, bad)


def test_damage_after_the_bounce_row_raises_and_the_buffer_decodes_the_next_image():
    good = jpeg(256, 200, 3, subsampling=2)
    spliced = _jpeg_codec.add_restart_markers(good, 1)
    backing = bytearray(256 * 200 * 4 + 64)
    out = memoryview(backing)[(-address(backing)) % 32:]  # every row on the boundary: the bounce row from row 0
    rng = np.random.default_rng(0)
    for trial in range(60):
        damaged = bytearray(spliced if trial % 2 else good)
        if trial % 3 == 0:
            damaged = damaged[:len(damaged) * 3 // 4]
        else:
            for _ in range(4):
                damaged[int(rng.integers(len(damaged) // 2, len(damaged) - 2))] = int(rng.integers(0, 256))
        try:
            _jpeg_codec.decode_region(bytes(damaged), 0, 0, 256, 200, 1, out, bool(trial % 2))
        except ValueError:
            pass
    _jpeg_codec.decode_region(good, 0, 0, 256, 200, 1, out)
    np.testing.assert_array_equal(np.frombuffer(out, np.uint8, 256 * 200 * 4).reshape(200, 256, 4)[:, :, :3],
                                  pil(good))


def test_threads_decoding_at_once_into_their_own_aligned_buffers():
    images = [jpeg(203, 157, 5), _jpeg_codec.add_restart_markers(jpeg(320, 96, 6, subsampling=1), 2), jpeg(17, 300, 7)]
    wanted = [pil(data) for data in images]
    wrong = []

    def work(seed: int) -> None:
        backing = bytearray((1 << 20) + 64)
        base = (-address(backing)) % 32
        for i in range(60):
            data, want = images[(seed + i) % 3], wanted[(seed + i) % 3]
            height, width = want.shape[:2]
            out = memoryview(backing)[base + 16 * (i % 2):]
            span, rows, left = _jpeg_codec.decode_region(data, 0, 0, width, height, 1, out)
            got = np.frombuffer(out, np.uint8, span * rows * 4).reshape(rows, span, 4)[:, left:left + width, :3]
            if not np.array_equal(got, want):
                wrong.append((seed, i))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_the_scratch_buffer_in_a_forked_child_and_past_the_kept_size():
    data = jpeg(640, 480, 8)
    turbo_decode.decode_image(data)  # the parent's scratch buffer exists before the fork
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its mapping is wiped, and still 16 past a boundary
        ok = np.array_equal(turbo_decode.decode_image(data), pil(data))
        ok = ok and address(turbo_decode._buffer(1000)) % 32 == 16
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(pid, 0)
    kept = turbo_decode._buffer(1000)
    big = turbo_decode._buffer(turbo_decode.KEPT_BUFFER_BYTES + 1)
    assert address(big) % 32 == 16 and turbo_decode._buffer(1000) is kept


def test_the_pil_fallback_of_the_crop_resize_gives_the_c_paths_pixels(monkeypatch):
    images = [jpeg(500, 375, 9), _jpeg_codec.add_restart_markers(jpeg(333, 500, 10, subsampling=1), 2)]
    rng = np.random.default_rng(4)
    for data in images:
        width, height = Image.open(io.BytesIO(data)).size
        for k in range(4):
            x0, y0 = rng.uniform(0, width / 2), rng.uniform(0, height / 2)
            box = np.array([x0, y0, rng.uniform(x0 + 1, width), rng.uniform(y0 + 1, height)])
            c_path, fallback = np.empty((96, 96, 3), np.uint8), np.empty((96, 96, 3), np.uint8)
            monkeypatch.setattr(turbo_decode, "RESIZE_IN_C", True)
            turbo_decode.decode_crop_into(data, box, bool(k % 2), c_path)
            monkeypatch.setattr(turbo_decode, "RESIZE_IN_C", False)
            turbo_decode.decode_crop_into(data, box, bool(k % 2), fallback)
            np.testing.assert_array_equal(c_path, fallback)


def test_every_tier_resizes_as_pil_on_odd_boxes_upscales_and_single_pixels():
    rng = np.random.default_rng(46)
    cases = [(7, 5, (0.5, 0.25, 6.75, 4.5), 1, 1), (3, 3, (0, 0, 3, 3), 300, 2), (1, 1, (0, 0, 1, 1), 5, 7),
             (2000, 3, (1.5, 0, 1999.25, 3), 2, 1), (333, 211, (10.3, 7.7, 11.1, 8.2), 224, 224),
             (640, 480, (0, 0, 640, 480), 3, 640)]
    for width, height, box, out_w, out_h in cases:
        source = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
        image = Image.frombuffer("RGBX", (width, height), source.tobytes(), "raw", "RGBX", 0, 1)
        want = np.asarray(image.resize((out_w, out_h), Image.BILINEAR, box=box).convert("RGB"))
        for tier in range(_jpeg_codec.resize_simd() + 1):
            out = np.empty((out_h, out_w, 3), np.uint8)
            _jpeg_codec.resize_rgbx(source, width, height, box, out, out_w, out_h, False, tier)
            np.testing.assert_array_equal(out, want, err_msg=f"tier {tier} {width}x{height} {box} -> {out_w}x{out_h}")
