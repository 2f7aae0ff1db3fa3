"""Decode one JPEG with libjpeg-turbo (pillow-simd) straight into a batch slot.

Measured on the 2-core dev machine (see bench/results): PIL's decode plus one
fused crop-and-resize (``resize(box=...)``) beats simplejpeg + PIL, because
simplejpeg's numpy output has to be copied back into a PIL image to be
resized. The crop is never materialised at full size, and only the 224x224
result is converted to numpy. When the crop is downscaled 2x or more, the
JPEG is decoded at reduced size through DCT scaling (``Image.draft``).
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

MAX_PIXELS = 89_478_485  # as the converter's default: a header claiming more is refused before decoding
ANTIALIAS = Image.BILINEAR  # PIL's bilinear downscale is antialiased, as torchvision's on PIL images
FAST = Image.NEAREST


def decode_crop_into(
    data: bytes,
    box: np.ndarray,
    flip: bool,
    out: np.ndarray,
    *,
    fast_resize: bool = False,
    reduced_decode: bool = True,
) -> None:
    """Decode ``data``, resize ``box`` (x0, y0, x1, y1) to ``out`` (H, W, 3 uint8), flip if asked.

    Raises OSError/ValueError (data errors) on bad bytes.
    """
    out_h, out_w = out.shape[:2]
    try:
        image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as e:  # not an OSError: turn it into a data error
        raise ValueError(f"decompression bomb: {e}") from None
    width, height = image.size
    if width * height > MAX_PIXELS:  # a corrupted or hostile header: never allocate for it
        raise ValueError(f"header claims {width}x{height} pixels (> {MAX_PIXELS}): decompression bomb")
    x0, y0, x1, y1 = (float(v) for v in box)
    x0, y0 = max(0.0, min(x0, width - 1.0)), max(0.0, min(y0, height - 1.0))
    x1, y1 = max(x0 + 1.0, min(x1, float(width))), max(y0 + 1.0, min(y1, float(height)))
    if reduced_decode and image.format == "JPEG":
        # Ask for the smallest decode in which the crop still has >= out pixels.
        need = (max(1, int(width * out_w / (x1 - x0))), max(1, int(height * out_h / (y1 - y0))))
        if need[0] * 2 <= width and need[1] * 2 <= height:
            image.draft("RGB", need)
            sx, sy = image.size[0] / width, image.size[1] / height
            x0, x1, y0, y1 = x0 * sx, x1 * sx, y0 * sy, y1 * sy
    if image.mode != "RGB":
        image = image.convert("RGB")
    resized = image.resize((out_w, out_h), FAST if fast_resize else ANTIALIAS, box=(x0, y0, x1, y1))
    if flip:
        # PIL flips the small result from its cached block arena; numpy's flipped
        # copy of 3-byte pixels measured ~200 us, torch.flip's 150 KB temp ~10% of throughput.
        resized = resized.transpose(Image.FLIP_LEFT_RIGHT)
    out[...] = np.asarray(resized)
