"""The region decoder (dataio.formats.jpeg._jpeg_codec) against PIL's whole-image decode: same pixels, clear errors."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from PIL import Image

from dataio import ImageLoader
from dataio.augment import crop_boxes
from dataio.images.turbo_decode import ARROW_EXPORT, REGION_DECODE, decode_crop_into, dct_scale
from dataio.formats.images.synthetic import synthetic_image

pytestmark = pytest.mark.skipif(not REGION_DECODE, reason="dataio.formats.jpeg._jpeg_codec not built")
from dataio.formats.jpeg import _jpeg_codec# noqa: E402  (after the skip mark: absent when not built)


def encoded(image: Image.Image, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90, **options)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def jpegs() -> list[bytes]:
    """Photo-like JPEGs in the layouts real data has: 4:2:0, 4:2:2, 4:4:4, progressive, restart markers,
    odd sizes, grayscale."""
    rng = np.random.default_rng(4)
    images = [synthetic_image(i, rng) for i in range(6)]
    odd = images[0].resize((333, 251))
    return [encoded(images[0]), encoded(images[1], subsampling=1), encoded(images[2], subsampling=0),
            encoded(images[3], progressive=True), encoded(images[4], restart_marker_rows=1),
            encoded(images[4], optimize=True), encoded(odd), encoded(images[5].convert("L"))]


def both_paths(data: bytes, box: np.ndarray, flip: bool, size: int, **options) -> tuple[np.ndarray, np.ndarray]:
    whole, region = (np.zeros((size, size, 3), np.uint8) for _ in range(2))
    decode_crop_into(data, box, flip, whole, region_decode=False, **options)
    decode_crop_into(data, box, flip, region, region_decode=True, **options)
    return whole, region


def boxes_for(data: bytes, count: int, seed: int) -> np.ndarray:
    width, height = Image.open(io.BytesIO(data)).size
    rng = np.random.default_rng(seed)
    train = crop_boxes.random_resized_crop_boxes(np.full(count, width), np.full(count, height), rng, (0.08, 1.0),
                                            (3 / 4, 4 / 3))
    val = crop_boxes.center_crop_boxes(np.array([width]), np.array([height]), 0.875)
    edges = np.array([[0, 0, width, height], [width - 7.5, height - 9.25, width, height], [0, 0, 3, 2]], float)
    return np.concatenate([train, val, edges])


def test_region_decode_gives_the_whole_decodes_pixels(jpegs):
    """At full scale the same libjpeg-turbo gives bit-identical crops: rows skipped and columns cropped lose nothing."""
    for index, data in enumerate(jpegs):
        for i, box in enumerate(boxes_for(data, 40, index)):
            whole, region = both_paths(data, box, i % 2 == 1, 64, reduced_decode=False)
            np.testing.assert_array_equal(region, whole, err_msg=f"image {index}, box {box}")


def test_region_decode_with_dct_scaling_is_within_one_level(jpegs):
    """With reduced-size decoding the box is rescaled in float, so rare pixels differ by one level."""
    worst, scaled = 0, 0
    for index, data in enumerate(jpegs):
        width, height = Image.open(io.BytesIO(data)).size
        for box in boxes_for(data, 40, 100 + index):
            whole, region = both_paths(data, box, False, 32)
            worst = max(worst, int(np.abs(whole.astype(int) - region).max()))
            scaled += dct_scale(width, height, tuple(box), 32, 32) > 1
    assert worst <= 1 and scaled > 50  # and most boxes here were decoded at reduced size


def test_dct_scale_follows_pils_draft_rule():
    assert dct_scale(500, 400, (0, 0, 500, 400), 224, 224) == 1  # < 2x downscale: full size
    assert dct_scale(1000, 800, (0, 0, 1000, 800), 224, 224) == 2
    assert dct_scale(4000, 3000, (0, 0, 4000, 3000), 224, 224) == 8
    assert dct_scale(4000, 3000, (0, 0, 400, 300), 224, 224) == 1  # a small crop of a big image
    for width, height, size in ((1000, 800, 224), (4000, 3000, 64), (640, 480, 32)):
        image = Image.open(io.BytesIO(encoded(Image.new("RGB", (width, height)))))
        image.draft("RGB", (size, size))
        assert image.size == (-(-width // dct_scale(width, height, (0, 0, width, height), size, size)),
                              -(-height // dct_scale(width, height, (0, 0, width, height), size, size)))


def test_cmyk_and_png_fall_back_to_pil():
    rgb = synthetic_image(0, np.random.default_rng(1))
    cmyk = io.BytesIO()
    rgb.convert("CMYK").save(cmyk, format="JPEG", quality=90)
    png = io.BytesIO()
    rgb.save(png, format="PNG")
    with pytest.raises(NotImplementedError):
        _jpeg_codec.header(cmyk.getvalue())
    box = np.array([10.0, 20.0, 200.0, 180.0])
    for data in (cmyk.getvalue(), png.getvalue()):
        whole, region = both_paths(data, box, True, 48)
        np.testing.assert_array_equal(region, whole)


def test_bad_bytes_are_data_errors_naming_the_reason(jpegs):
    out = np.zeros((16, 16, 3), np.uint8)
    box = np.array([0.0, 0.0, 100.0, 100.0])
    with pytest.raises(ValueError, match="JPEG decode failed: .*"):
        decode_crop_into(b"\xff\xd8garbage", box, False, out)
    with pytest.raises(ValueError, match="Premature end"):  # truncated: libjpeg only warns, we refuse
        decode_crop_into(jpegs[0][: len(jpegs[0]) // 2], np.array([0.0, 200.0, 400.0, 300.0]), False, out)
    with pytest.raises(ValueError, match="outside"):
        _jpeg_codec.decode_region(jpegs[0], 0, 0, 10_000, 10, 1, bytearray(1 << 20))
    with pytest.raises(ValueError, match="too small"):
        _jpeg_codec.decode_region(jpegs[0], 0, 0, 100, 100, 1, bytearray(100))
    with pytest.raises(ValueError, match="scale_denom"):
        _jpeg_codec.decode_region(jpegs[0], 0, 0, 100, 100, 3, bytearray(1 << 20))


def test_a_jpeg_header_claiming_too_many_pixels_is_refused_before_decoding(jpegs):
    data = bytearray(jpegs[0])
    sof = data.index(b"\xff\xc0")  # baseline SOF0: length(2) precision(1) height(2) width(2)
    data[sof + 5:sof + 9] = (30000).to_bytes(2, "big") * 2
    with pytest.raises(ValueError, match="30000x30000 pixels"):
        decode_crop_into(bytes(data), np.array([0.0, 0.0, 100.0, 100.0]), False, np.zeros((8, 8, 3), np.uint8))


def test_threads_decode_concurrently_into_their_own_buffers(jpegs):
    jobs = [(data, box) for data in jpegs for box in boxes_for(data, 12, 7)]

    def decode(job: tuple[bytes, np.ndarray]) -> np.ndarray:
        out = np.zeros((40, 40, 3), np.uint8)
        decode_crop_into(job[0], job[1], False, out)
        return out

    alone = [decode(job) for job in jobs]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(decode, jobs * 3))
    for i, out in enumerate(together):
        np.testing.assert_array_equal(out, alone[i % len(jobs)])


def test_loader_batches_are_the_same_with_and_without_region_decode(image_shards):
    def epoch(region: bool) -> list[np.ndarray]:
        with ImageLoader(image_shards, batch_size=8, image_size=48, seed=3, region_decode=region,
                         reduced_decode=False) as loader:
            return [images.numpy().copy() for images, _ in loader]

    for region, whole in zip(epoch(True), epoch(False), strict=True):
        np.testing.assert_array_equal(region, whole)


@pytest.mark.parametrize("size", [(1, 1), (3, 2), (5, 7), (224, 224)])
def test_pack_rgbx_packs_and_mirrors_exactly(size):
    """The decoder's output step: PIL's RGBX bytes to RGB in the batch slot, mirrored when flipped."""
    width, height = size
    pixels = np.random.default_rng(width).integers(0, 256, (height, width, 3), dtype=np.uint8)
    rgbx = Image.fromarray(pixels).tobytes("raw", "RGBX")
    out = np.full_like(pixels, 7)
    _jpeg_codec.pack_rgbx(rgbx, out, width, height, False)
    assert np.array_equal(out, pixels)
    _jpeg_codec.pack_rgbx(rgbx, out, width, height, True)
    assert np.array_equal(out, pixels[:, ::-1])
    with pytest.raises(ValueError, match="pack_rgbx"):
        _jpeg_codec.pack_rgbx(rgbx[:-1], out, width, height, False)
    if ARROW_EXPORT:  # the same from PIL's own memory, through its Arrow export (no tobytes copy)
        image = Image.fromarray(pixels).convert("RGBX")
        for flip in (False, True):
            out[...] = 7
            _jpeg_codec.pack_rgbx(image.im.__arrow_c_array__(), out, width, height, flip)
            assert np.array_equal(out, pixels[:, ::-1] if flip else pixels)
        with pytest.raises(TypeError, match="capsule"):  # another size: refused, not read past its end
            _jpeg_codec.pack_rgbx(image.im.__arrow_c_array__(), out[:, :-1].copy(), width - 1, height, False)
        with pytest.raises(TypeError, match="capsule"):  # a one-band image is not 4-byte pixels
            _jpeg_codec.pack_rgbx(image.convert("L").im.__arrow_c_array__(), out, width, height, False)
