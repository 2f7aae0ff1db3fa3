"""Restart-interval splicing: the packer's lossless rewrite and the reader's cut (dataio/jpeg_*.c).

The contract: a rewritten file decodes to the same pixels; a spliced decode of any box gives the
same pixels as decoding the file as it is; anything the splicer does not recognise is decoded as
it is, so damaged files are reported as before.
"""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest
from PIL import Image

from dataio.images.turbo_decode import REGION_DECODE
from dataio.formats.images.image_prepare import ImagePrepareConfig, PreparedImage, prepare_image
from dataio.formats.images.synthetic import synthetic_image

pytestmark = pytest.mark.skipif(not REGION_DECODE, reason="dataio.formats.jpeg._jpeg_codec not built")
from dataio.formats.jpeg import _jpeg_codec# noqa: E402  (after the skip mark: absent when not built)

SUBSAMPLINGS = {"4:4:4": 0, "4:2:2": 1, "4:2:0": 2}


def encoded(image: Image.Image, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90, **options)
    return buffer.getvalue()


def pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)))


def segments(data: bytes) -> dict[int, bytes]:
    """The header segments up to SOS, by marker (the last of each)."""
    found, i = {}, 2
    while True:
        marker, length = data[i + 1], struct.unpack(">H", data[i + 2:i + 4])[0]
        found[marker] = data[i + 4:i + 2 + length]
        if marker == 0xDA:
            return found
        i += 2 + length


@pytest.fixture(scope="module")
def sources() -> dict[str, bytes]:
    """JPEGs in the layouts real data has, at sizes that are and are not whole MCUs."""
    rng = np.random.default_rng(11)
    images = [synthetic_image(i, rng) for i in range(4)]
    found = {name: encoded(images[0], subsampling=code) for name, code in SUBSAMPLINGS.items()}
    found["odd 4:2:0"] = encoded(images[1].resize((333, 251)))
    found["progressive"] = encoded(images[2], progressive=True)
    found["grayscale"] = encoded(images[3].convert("L").resize((203, 157)))
    found["tiny"] = encoded(images[3].resize((5, 3)))
    return found


@pytest.fixture(scope="module")
def rewritten(sources) -> dict[str, bytes]:
    return {name: _jpeg_codec.add_restart_markers(data, 2) for name, data in sources.items()}


def test_rewrite_is_lossless_baseline_with_intervals_that_tile_mcu_rows(sources, rewritten):
    for name, data in rewritten.items():
        np.testing.assert_array_equal(pixels(data), pixels(sources[name]), err_msg=name)
        found = segments(data)
        assert 0xC0 in found or 0xC1 in found, f"{name}: not baseline"
        interval = struct.unpack(">H", found[0xDD])[0]
        sof = found.get(0xC0, found.get(0xC1))
        height, width, components = struct.unpack(">HHB", sof[1:6])
        hmax = max(sof[7 + 3 * k] >> 4 for k in range(components))
        mcu_width = 8 if components == 1 else 8 * hmax
        per_row = -(-width // mcu_width)
        assert 1 <= interval <= 2 and per_row % interval == 0, (name, interval, per_row)
    # 2 MCUs where a row has an even count; 1 where it is odd (333 px: 21 MCUs of 16)
    assert struct.unpack(">H", segments(rewritten["4:2:0"])[0xDD])[0] == 2
    assert struct.unpack(">H", segments(rewritten["odd 4:2:0"])[0xDD])[0] == 1


def test_rewrite_of_bad_bytes_is_a_value_error(sources):
    with pytest.raises(ValueError, match="JPEG"):
        _jpeg_codec.add_restart_markers(b"not a jpeg at all", 2)
    with pytest.raises(ValueError, match="JPEG"):
        _jpeg_codec.add_restart_markers(sources["4:2:0"][:2000], 2)


def test_splice_gives_that_part_of_the_image(rewritten):
    """The spliced file, decoded on its own, equals the whole image's pixels there, away from its edges."""
    for name, data in rewritten.items():
        full = pixels(data)
        height, width = full.shape[:2]
        if width < 64:
            continue
        box = (width // 3, height // 4, width // 3 + width // 4, height // 4 + height // 5)
        spliced, left, top = _jpeg_codec.splice(data, *box)
        assert len(spliced) < len(data) * 0.6, name
        part = pixels(spliced)
        assert left <= box[0] and top <= box[1]
        assert left + part.shape[1] >= box[2] and top + part.shape[0] >= box[3]
        inner = (slice(box[1] - top, box[3] - top), slice(box[0] - left, box[2] - left))
        margin = 2  # chroma upsampling at the cut reads a neighbour that is gone
        np.testing.assert_array_equal(
            part[inner][margin:-margin, margin:-margin],
            full[box[1]:box[3], box[0]:box[2]][margin:-margin, margin:-margin], err_msg=name)


def test_splice_declines_what_it_cannot_cut(sources, rewritten):
    data = rewritten["4:2:0"]
    width, height = _jpeg_codec.header(data)
    assert _jpeg_codec.splice(sources["4:2:0"], 10, 10, 50, 50) is None  # no restart markers
    assert _jpeg_codec.splice(sources["progressive"], 10, 10, 50, 50) is None
    straddling = encoded(Image.new("RGB", (512, 64), (90, 120, 30)), restart_marker_blocks=3)  # 32 MCUs a row
    assert _jpeg_codec.splice(straddling, 10, 10, 50, 50) is None  # intervals that straddle MCU rows
    assert _jpeg_codec.splice(data, 0, 0, width, height) is None  # nothing to cut
    assert _jpeg_codec.splice(data, 50, 50, 40, 60) is None  # empty box
    assert _jpeg_codec.splice(data, -2**62, -2**62, 2**62, 2**62) is None  # the whole image, without overflow
    assert _jpeg_codec.splice(data[: len(data) // 2], 10, 10, 50, 50) is None  # truncated: no EOI
    out_of_sequence = bytearray(data)
    first = out_of_sequence.index(b"\xff\xd0", len(data) // 3)  # an RST0 past the headers
    out_of_sequence[first + 1] = 0xD3
    assert _jpeg_codec.splice(bytes(out_of_sequence), 10, 10, 50, 50) is None


def decoded_region(data: bytes, box: tuple[int, int, int, int], denom: int, splice: bool) -> np.ndarray:
    """The box's pixels from decode_region, spliced or not."""
    buffer = bytearray(4 << 20)
    x0, y0, x1, y1 = box
    span, rows, left = _jpeg_codec.decode_region(data, x0, y0, x1, y1, denom, buffer, splice)
    region = np.frombuffer(buffer, np.uint8, span * rows * 4).reshape(rows, span, 4)
    return region[:, left:left + x1 - x0].copy()


def test_spliced_decode_is_bit_identical_at_every_dct_scale(rewritten):
    """A spliced decode (at the spliced file's full width) gives the whole image's pixels in any box; the
    cropped decode of a file as it is (jpeg_crop_scanline) does once the box keeps the loader's margin from
    the crop's edges, where fancy upsampling has no neighbour (region_of adds it)."""
    rng = np.random.default_rng(5)
    checked = spliced = cropped_edges = 0
    for name, data in rewritten.items():
        width, height = _jpeg_codec.header(data)
        for denom in (1, 2, 4, 8):
            scaled_w, scaled_h = -(-width // denom), -(-height // denom)
            whole = decoded_region(data, (0, 0, scaled_w, scaled_h), denom, False)
            for _ in range(12):
                x0, x1 = sorted(rng.integers(0, scaled_w + 1, 2))
                y0, y1 = sorted(rng.integers(0, scaled_h + 1, 2))
                box = (int(x0), int(y0), int(max(x1, x0 + 1)), int(max(y1, y0 + 1)))
                if box[2] > scaled_w or box[3] > scaled_h:
                    continue
                want = whole[box[1]:box[3], box[0]:box[2]]
                cut = _jpeg_codec.splice(data, *((v + d) * denom for v, d in zip(box, (-2, -2, 2, 2), strict=True)))
                if cut is not None:  # as decode_region cuts: the box and 2 scaled pixels of context
                    np.testing.assert_array_equal(decoded_region(data, box, denom, True), want,
                                                  err_msg=f"{name}, 1/{denom}, box {box}")
                    spliced += 1
                cropped_edges += not np.array_equal(decoded_region(data, box, denom, False), want)
                left, top = max(0, box[0] - 2), max(0, box[1] - 2)
                wide = (left, top, min(scaled_w, box[2] + 2), min(scaled_h, box[3] + 2))
                for splice in (True, False):
                    np.testing.assert_array_equal(
                        decoded_region(data, wide, denom, splice)[box[1] - top:box[3] - top,
                                                                  box[0] - left:box[2] - left],
                        want, err_msg=f"{name}, 1/{denom}, box {box} with a margin, splice {splice}")
                checked += 1
    assert checked > 250 and spliced > 100
    assert cropped_edges > 0  # the margin is needed: without it the crop's edges differ


def test_damaged_spliceable_file_is_still_reported(rewritten):
    data = rewritten["4:2:0"]
    width, height = _jpeg_codec.header(data)
    with pytest.raises(ValueError, match="JPEG"):  # a box in the lost rows (rows below a box are never read)
        decoded_region(data[: len(data) * 2 // 3], (10, height - 60, 60, height - 10), 1, True)
    with pytest.raises(ValueError, match="outside"):
        decoded_region(data, (-4, 10, 60, 60), 1, True)


def test_packer_keeps_clean_jpegs_pixel_for_pixel_with_restart_markers(sources):
    data = sources["4:2:0"]
    prepared = prepare_image(data, ImagePrepareConfig())
    assert isinstance(prepared, PreparedImage) and not prepared.converted
    assert 0xDD in segments(prepared.jpeg)
    np.testing.assert_array_equal(pixels(prepared.jpeg), pixels(data))
    assert _jpeg_codec.splice(prepared.jpeg, 100, 100, 140, 140) is not None
    kept = prepare_image(data, ImagePrepareConfig(restart_interval=0))
    assert kept.jpeg == data
    converted = prepare_image(encoded(synthetic_image(0, np.random.default_rng(2)).convert("L")), ImagePrepareConfig())
    assert converted.converted and 0xDD in segments(converted.jpeg)


def test_restart_interval_is_validated():
    with pytest.raises(ValueError, match="restart_interval"):
        ImagePrepareConfig(restart_interval=-1)


def test_boxes_and_headers_at_the_limits_are_handled(rewritten):
    data = rewritten["4:2:0"]
    with pytest.raises(ValueError, match="outside"):  # no overflow scaling a huge box for the splicer
        decoded_region(data, (0, 0, 2**62, 2**62), 8, True)
    with pytest.raises(ValueError, match="outside"):
        decoded_region(data, (2**62, 2**62, 10, 10), 8, True)
    lying = bytearray(data)  # a header that claims 65535 x 65535 pixels over the same few bytes
    sof = lying.index(b"\xff\xc0")
    lying[sof + 5:sof + 9] = b"\xff\xff\xff\xff"
    assert _jpeg_codec.splice(bytes(lying), 0, 0, 64, 64) is None
