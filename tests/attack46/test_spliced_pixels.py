"""A spliced file's region is the whole image's pixels at any box (formats/jpeg/_jpeg_codec.c decode_spliced).

The splice commit (257faef) made the spliced decode full-width so that a restart-marked file gives PIL's whole-image
pixels in any box, not only inside the loader's 2-pixel margin. Two boxes still missed: one whose splice keeps every
interval (jpeg_splice declines, and the cropped decode's edges are not the whole image's), and one whose cut is a
single narrow interval column (libjpeg-turbo turns off fancy chroma upsampling where a component's downsampled width
is 2 or less, so every column of the cut differs from the whole image's).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from dataio.images.turbo_decode import REGION_DECODE

pytestmark = pytest.mark.skipif(not REGION_DECODE, reason="dataio.formats.jpeg._jpeg_codec not built")
from dataio.formats.jpeg import _jpeg_codec  # noqa: E402  (after the skip mark: absent when not built)


def jpeg(width: int, height: int, subsampling: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (height // 4 + 1, width // 4 + 1, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(small).resize((width, height), Image.BILINEAR).save(out, "JPEG", quality=90,
                                                                       subsampling=subsampling)
    return out.getvalue()


def whole(data: bytes, denom: int) -> np.ndarray | None:
    """PIL's decode of the whole image at 1/denom (its draft picks the same DCT scaling), or None where draft
    cannot ask for that scale (a side shorter than denom)."""
    image = Image.open(io.BytesIO(data))
    width, height = image.size
    image.draft("RGB", (max(1, width // denom), max(1, height // denom)))
    if image.size != (-(-width // denom), -(-height // denom)):
        return None
    return np.asarray(image.convert("RGB"))


def region(data: bytes, box: tuple[int, int, int, int], denom: int) -> np.ndarray:
    out = bytearray(1 << 20)
    span, rows, left = _jpeg_codec.decode_region(data, *box, denom, out, True)
    pixels = np.frombuffer(out, np.uint8, span * rows * 4).reshape(rows, span, 4)
    return pixels[:, left:left + box[2] - box[0], :3]


# (width, height, subsampling, denom, box): found by a sweep of random boxes over small images
KEPT_EVERY_INTERVAL = [(46, 7, 1, 1, (7, 0, 40, 2)), (59, 4, 1, 1, (27, 1, 52, 2)), (30, 12, 1, 2, (3, 3, 10, 6)),
                       (60, 6, 2, 1, (18, 4, 50, 6))]
NARROW_CUT = [(68, 81, 2, 1, (67, 14, 68, 31)), (39, 34, 1, 2, (18, 10, 19, 16)), (38, 48, 1, 4, (0, 10, 2, 11)),
              (41, 7, 1, 4, (10, 1, 11, 2))]


@pytest.mark.parametrize("width, height, subsampling, denom, box", KEPT_EVERY_INTERVAL)
def test_a_box_whose_splice_keeps_every_interval_has_the_whole_images_pixels(width, height, subsampling, denom,
                                                                              box):
    data = _jpeg_codec.add_restart_markers(jpeg(width, height, subsampling, width), 2)
    x0, y0, x1, y1 = box
    cut = _jpeg_codec.splice(data, (x0 - 2) * denom + 2, (y0 - 2) * denom + 2, (x1 + 2) * denom - 2,
                             (y1 + 2) * denom - 2)
    assert cut is None  # the splice keeps every interval: decode_region decodes the file as it is
    np.testing.assert_array_equal(region(data, box, denom), whole(data, denom)[y0:y1, x0:x1])


@pytest.mark.parametrize("width, height, subsampling, denom, box", NARROW_CUT)
def test_a_narrow_cut_has_the_whole_images_chroma(width, height, subsampling, denom, box):
    data = _jpeg_codec.add_restart_markers(jpeg(width, height, subsampling, width), 2)
    x0, y0, x1, y1 = box
    np.testing.assert_array_equal(region(data, box, denom), whole(data, denom)[y0:y1, x0:x1])


def test_every_box_of_small_spliced_images_is_the_whole_images():
    """A sweep: every subsampling, every DCT scale, boxes touching each edge, 1 and 2 pixels wide."""
    rng = np.random.default_rng(46)
    bad = []
    for width, height in ((38, 48), (46, 7), (68, 81), (17, 33), (100, 40)):
        for subsampling in (0, 1, 2):
            data = _jpeg_codec.add_restart_markers(jpeg(width, height, subsampling, width + subsampling), 1)
            for denom in (1, 2, 4, 8):
                want = whole(data, denom)
                if want is None:
                    continue
                sh, sw = want.shape[:2]
                boxes = [(0, 0, sw, sh), (sw - 1, 0, sw, sh), (0, sh - 1, sw, sh), (0, 0, 1, 1), (sw - 2, 0, sw, 2)]
                for _ in range(12):
                    x0, y0 = int(rng.integers(0, sw)), int(rng.integers(0, sh))
                    boxes.append((x0, y0, int(rng.integers(x0 + 1, sw + 1)), int(rng.integers(y0 + 1, sh + 1))))
                for x0, y0, x1, y1 in boxes:
                    if x1 <= x0 or y1 <= y0 or x0 < 0 or y0 < 0:
                        continue
                    if not np.array_equal(region(data, (x0, y0, x1, y1), denom), want[y0:y1, x0:x1]):
                        bad.append((width, height, subsampling, denom, (x0, y0, x1, y1)))
    assert not bad, f"{len(bad)} boxes differ from the whole image, e.g. {bad[:4]}"
