"""The extension's crop-resize (formats/jpeg/rgbx_resize.c) against PIL's resize(box=...): the same pixels."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from dataio.images.turbo_decode import REGION_DECODE, RESIZE_IN_C

pytestmark = pytest.mark.skipif(not REGION_DECODE, reason="dataio.formats.jpeg._jpeg_codec not built")
from dataio.formats.jpeg import _jpeg_codec  # noqa: E402  (after the skip mark: absent when not built)

LEVELS = list(range(_jpeg_codec.resize_simd() + 1))  # 0 plain C, then AVX2 and AVX-512 where the CPU has them


def pil_resized(pixels: np.ndarray, box: tuple[float, ...], size: tuple[int, int], flip: bool) -> np.ndarray:
    height, width = pixels.shape[:2]
    image = Image.frombuffer("RGBX", (width, height), pixels.tobytes(), "raw", "RGBX", 0, 1)
    out = np.asarray(image.resize(size, Image.BILINEAR, box=box).convert("RGB"))
    return out[:, ::-1] if flip else out


def cases(rng: np.random.Generator, count: int):
    """(pixels, box, (out_w, out_h), flip): random boxes and sizes, and the shapes each kernel has a branch for."""
    fixed = [((83, 61), (0.0, 0.0, 83.0, 61.0), (29, 61)),  # no vertical pass
             ((83, 61), (0.0, 0.0, 83.0, 61.0), (83, 17)),  # no horizontal pass
             ((90, 70), (5.0, 7.0, 37.0, 39.0), (32, 32)),  # whole pixels, the output's size: a crop
             ((700, 40), (0.0, 0.0, 700.0, 40.0), (50, 13)),  # downscale 14x: taps past the AVX-512 load
             ((12, 9), (0.5, 0.5, 11.0, 8.5), (40, 30)),  # rows under 16 pixels: upscaled
             ((400, 300), (68.75, 18.75, 331.25, 281.25), (224, 224)),  # the eval centre crop
             ((5, 3), (0.0, 0.0, 5.0, 3.0), (1, 1)), ((1, 1), (0.0, 0.0, 1.0, 1.0), (7, 3))]
    for i, ((width, height), box, size) in enumerate(fixed):
        yield rng.integers(0, 256, (height, width, 4), dtype=np.uint8), box, size, bool(i % 2)
    for i in range(count):
        width, height = (int(v) for v in rng.integers(1, 500, 2))
        pixels = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
        if i % 3 == 0:  # smooth content: sums near the clamps and the rounding edges of every channel
            pixels[..., :3] = np.linspace(0, 255, width, dtype=np.uint8)[None, :, None]
        x0, x1 = sorted(rng.uniform(0, width, 2))
        y0, y1 = sorted(rng.uniform(0, height, 2))
        box = (x0, y0, min(width, x1 + 0.5), min(height, y1 + 0.5))
        yield pixels, box, (int(rng.integers(1, 260)), int(rng.integers(1, 260))), bool(i % 2)


@pytest.mark.parametrize("level", LEVELS)
def test_resize_rgbx_gives_pils_pixels(level):
    """pillow-simd's own integers at every kernel level (plain Pillow rounds its 22-bit coefficients
    differently: within one level there, and the loader keeps PIL's resize, RESIZE_IN_C)."""
    worst = 0
    for pixels, box, (out_w, out_h), flip in cases(np.random.default_rng(level), 400):
        height, width = pixels.shape[:2]
        batch = np.full((3, out_h, out_w, 3), 7, dtype=np.uint8)  # the slot between two others
        _jpeg_codec.resize_rgbx(pixels.tobytes(), width, height, box, batch[1], out_w, out_h, flip, level)
        assert (batch[0] == 7).all() and (batch[2] == 7).all(), "wrote outside its slot"
        expected = pil_resized(pixels, box, (out_w, out_h), flip)
        if RESIZE_IN_C:
            np.testing.assert_array_equal(batch[1], expected, err_msg=f"{width}x{height} {box} -> {out_w}x{out_h}")
        worst = max(worst, int(np.abs(batch[1].astype(int) - expected).max()))
    assert worst <= 1


def test_resize_rgbx_refuses_what_pil_refuses():
    pixels = bytes(4 * 10 * 8)
    out = np.zeros((4, 4, 3), np.uint8)
    for box in ((-1.0, 0.0, 5.0, 5.0), (0.0, 0.0, 10.5, 8.0), (6.0, 0.0, 5.0, 8.0)):
        with pytest.raises(ValueError, match="box"):
            _jpeg_codec.resize_rgbx(pixels, 10, 8, box, out, 4, 4, False)
    with pytest.raises(ValueError, match="must hold"):  # fewer bytes than the size says
        _jpeg_codec.resize_rgbx(pixels[:-1], 10, 8, (0.0, 0.0, 10.0, 8.0), out, 4, 4, False)
    with pytest.raises(ValueError, match="must hold"):  # a slot of another size
        _jpeg_codec.resize_rgbx(pixels, 10, 8, (0.0, 0.0, 10.0, 8.0), out, 4, 3, False)


def test_a_repeated_geometry_reuses_its_plan_for_new_pixels():
    """Each thread keeps the plan of its last geometry (an eval epoch repeats one per image size): the next
    image of that size, another size, then the first again, each gives its own PIL pixels."""
    rng = np.random.default_rng(5)
    geometries = [((400, 300), (68.75, 18.75, 331.25, 281.25)), ((375, 500), (23.4, 85.9, 351.6, 414.1))]
    for (width, height), box in geometries + geometries[:1]:
        for _ in range(2):
            pixels = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
            out = np.empty((224, 224, 3), np.uint8)
            _jpeg_codec.resize_rgbx(pixels.tobytes(), width, height, box, out, 224, 224, False)
            expected = pil_resized(pixels, box, (224, 224), False)
            assert np.array_equal(out, expected) if RESIZE_IN_C else np.abs(out.astype(int) - expected).max() <= 1
