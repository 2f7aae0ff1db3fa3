"""Issue 45 attack: the crop-resize's four CPU tiers (formats/jpeg/resize_*.c) on the geometries each kernel has a
branch or an edge for, compared with tier 0 and with pillow-simd, with the slot's neighbours and the buffers
watched; and threads resizing while another changes the process's tier. All of these held when written."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading

import numpy as np
import pytest
from PIL import Image

from dataio.images.turbo_decode import REGION_DECODE, RESIZE_IN_C

pytestmark = pytest.mark.skipif(not (REGION_DECODE and RESIZE_IN_C),
                                reason="the extension's crop-resize is not built or not pillow-simd's")
from dataio.formats.jpeg import _jpeg_codec, cpu_tier  # noqa: E402  (after the skip mark)

TIERS = range(_jpeg_codec.resize_simd() + 1)


@pytest.fixture(autouse=True)
def process_tier_restored():
    yield
    cpu_tier.use_tier(cpu_tier.TIERS[-1])


def pil_resized(pixels: np.ndarray, box, size, flip: bool) -> np.ndarray:
    height, width = pixels.shape[:2]
    image = Image.frombuffer("RGBX", (width, height), pixels.tobytes(), "raw", "RGBX", 0, 1)
    out = np.asarray(image.resize(size, Image.BILINEAR, box=box).convert("RGB"))
    return out[:, ::-1] if flip else out


def check_every_tier(pixels: np.ndarray, box, out_w: int, out_h: int, flip: bool) -> None:
    """Every tier: PIL's pixels, and nothing written into the slots before and after."""
    height, width = pixels.shape[:2]
    src = pixels.tobytes()  # exactly width * height * 4 bytes
    expected = pil_resized(pixels, box, (out_w, out_h), flip)
    for tier in TIERS:
        batch = np.full((3, out_h, out_w, 3), 7, np.uint8)
        _jpeg_codec.resize_rgbx(src, width, height, box, batch[1], out_w, out_h, flip, tier)
        where = f"tier {tier}: {width}x{height} {box} -> {out_w}x{out_h} flip={flip}"
        assert (batch[0] == 7).all() and (batch[2] == 7).all(), f"wrote outside its slot, {where}"
        np.testing.assert_array_equal(batch[1], expected, err_msg=where)


def odd_geometries(rng: np.random.Generator):
    """Widths and heights 1..40 around the kernels' 4, 8 and 16 steps, boxes at the right/bottom edge and
    fractional, 1-pixel outputs, upscales, and downscales past the AVX-512 load (taps over 16 pixels)."""
    for width in (1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 40):
        height = int(rng.integers(1, 41))
        for out_w in (1, 3, 4, 7, 8, 9, 12, 15, 16, 17, 31, 33, 40):
            out_h = int(rng.integers(1, 41))
            x0 = float(rng.uniform(0, width * 0.6))
            y0 = float(rng.uniform(0, height * 0.6))
            yield width, height, (x0, y0, float(width), float(height)), out_w, out_h  # to the right/bottom edge
            yield width, height, (0.0, 0.0, float(width), float(height)), out_w, out_h
    yield 700, 3, (0.0, 0.0, 700.0, 3.0), 41, 2  # 17x: AVX-512 falls back to AVX2
    yield 700, 3, (1.5, 0.0, 699.5, 3.0), 17, 1  # 41x
    yield 96, 5, (0.0, 0.0, 96.0, 5.0), 38, 5  # 2.53x: the load's edge
    yield 96, 5, (0.25, 0.0, 95.75, 5.0), 39, 5
    yield 3, 900, (0.0, 0.0, 3.0, 900.0), 3, 2  # 450 vertical taps (the AVX2 tail's 64-row bound)
    yield 40, 200, (0.0, 0.0, 40.0, 200.0), 13, 3
    yield 1, 1, (0.0, 0.0, 1.0, 1.0), 33, 17
    yield 10, 10, (3.0, 0.0, 3.0, 10.0), 4, 4  # boxes of no width or height: PIL resizes them too
    yield 10, 10, (10.0, 10.0, 10.0, 10.0), 17, 3
    yield 2, 2, (0.5, 0.5, 1.5, 1.5), 67, 5


@pytest.mark.parametrize("flip", [False, True])
def test_every_tier_gives_pils_pixels_on_odd_geometries(flip):
    rng = np.random.default_rng(45 + flip)
    for i, (width, height, box, out_w, out_h) in enumerate(odd_geometries(rng)):
        pixels = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
        if i % 3 == 0:  # smooth: sums at the rounding edges
            pixels[..., :3] = np.linspace(0, 255, width, dtype=np.uint8)[None, :, None]
        check_every_tier(pixels, box, out_w, out_h, flip)


def test_very_wide_rows_at_every_tier():
    rng = np.random.default_rng(7)
    pixels = rng.integers(0, 256, (3, 20000, 4), dtype=np.uint8)
    for box, out_w in (((0.0, 0.0, 20000.0, 3.0), 19993), ((0.5, 0.0, 20000.0, 3.0), 224),
                       ((3.25, 0.0, 19999.0, 3.0), 20011), ((0.0, 0.0, 20000.0, 3.0), 5)):
        check_every_tier(pixels, box, out_w, 2, out_w % 2 == 1)


def test_buffers_that_cannot_take_the_pixels_are_refused():
    """A strided, read-only or transposed slot and a short rgbx: an exception, never a write elsewhere."""
    pixels = np.random.default_rng(1).integers(0, 256, (10, 20, 4), dtype=np.uint8).tobytes()
    box = (0.5, 0.0, 20.0, 10.0)
    wide = np.zeros((8, 16, 3), np.uint8)
    read_only = np.zeros((4, 8, 3), np.uint8)
    read_only.flags.writeable = False
    for out in (wide[::2, ::2], read_only, np.zeros((8, 4, 3), np.uint8).transpose(1, 0, 2), bytes(96)):
        with pytest.raises(TypeError, match="read-write bytes-like"):
            _jpeg_codec.resize_rgbx(pixels, 20, 10, box, out, 8, 4, False)
    assert not wide.any()
    with pytest.raises(ValueError, match="must hold"):
        _jpeg_codec.resize_rgbx(pixels[:-1], 20, 10, box, np.zeros((4, 8, 3), np.uint8), 8, 4, False)
    with pytest.raises(ValueError, match="C-contiguous"):
        _jpeg_codec.resize_rgbx(np.zeros((10, 40, 4), np.uint8)[:, ::2], 20, 10, box, np.zeros((4, 8, 3), np.uint8),
                                8, 4, False)


def test_threads_resize_right_while_another_changes_the_process_tier():
    rng = np.random.default_rng(3)
    cases = []
    for i in range(12):
        width, height = int(rng.integers(16, 200)), int(rng.integers(16, 120))
        pixels = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
        x0, y0 = float(rng.uniform(0, width / 2)), float(rng.uniform(0, height / 2))
        box = (x0, y0, float(rng.uniform(x0 + 1, width)), float(rng.uniform(y0 + 1, height)))
        size = (int(rng.integers(1, 90)), int(rng.integers(1, 90)))
        cases.append((pixels.tobytes(), width, height, box, size, bool(i % 2), pil_resized(pixels, box, size, i % 2)))
    stop = threading.Event()
    failures: list[str] = []
    done = [0] * 3

    def resize(k: int) -> None:
        while not stop.is_set() and done[k] < 300:
            src, width, height, box, (out_w, out_h), flip, expected = cases[(k + done[k]) % len(cases)]
            out = np.empty((out_h, out_w, 3), np.uint8)
            _jpeg_codec.resize_rgbx(src, width, height, box, out, out_w, out_h, flip)
            if not np.array_equal(out, expected):
                failures.append(f"{width}x{height} {box} -> {out_w}x{out_h}")
            done[k] += 1

    def change() -> None:
        i = 0
        while not stop.is_set():
            cpu_tier.use_tier(cpu_tier.TIERS[i % 4]) if i % 2 else _jpeg_codec.resize_tier(i % 4)
            i += 1

    threads = [threading.Thread(target=resize, args=(k,)) for k in range(3)]
    changer = threading.Thread(target=change)
    for thread in threads + [changer]:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    stop.set()
    changer.join()
    assert failures == [] and min(done) > 0, (failures[:3], done)


def instructions(function: str) -> list[str]:
    """The mnemonics of ``function`` in the built extension (objdump)."""
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--disassemble={function}", _jpeg_codec.__file__],
                             capture_output=True, text=True, check=True).stdout
    return [line.split("\t", 1)[1] for line in listing.splitlines() if re.match(r"^\s+[0-9a-f]+:\t", line)]


@pytest.mark.skipif(shutil.which("objdump") is None, reason="binutils' objdump")
def test_each_tier_holds_only_its_own_instructions():
    """This CPU has all four tiers, so a kernel that strays into a higher tier's instructions would pass every
    pixel test here and die of SIGILL on the CPU it is for. The AVX2 tier's functions hold no AVX-512 (EVEX: zmm,
    mask registers, xmm/ymm 16-31); the plain AVX-512 tier's no VBMI or VNNI; the plain C tier's and the drivers'
    no AVX at all."""
    evex = re.compile(r"%zmm|%k[1-7]\b|%[xy]mm(1[6-9]|2\d|3[01])\b|\{evex\}")
    vbmi = re.compile(r"^(vpermb|vpermt2b|vpermi2b|vpmultishiftqb|vpdpwssds?|vpdpbusds?)\s")
    avx = re.compile(r"%ymm|^v")
    for function in ("h_row_avx2", "v_row_avx2"):
        code = instructions(function)
        assert code and not [i for i in code if evex.search(i)], function
    for function in ("h_rows_plain", "v_row_plain"):
        code = instructions(function)
        assert code and any(evex.search(i) for i in code) and not [i for i in code if vbmi.match(i)], function
    assert any(vbmi.match(i) for i in instructions("v_row_vbmi"))
    for function in ("h_row_scalar", "v_row_scalar", "rgbx_resize", "simd_plan_make", "zmm_plan_make",
                     "resize_cpu_tier", "h_row_zmm", "v_row_zmm"):
        code = instructions(function)
        assert code and not [i for i in code if avx.search(i)], function
