"""Pixels of any mode as 8-bit RGB, one rule for the packers and the readers.

PIL's ``convert("L")``/``convert("RGB")`` clips 16-bit, 32-bit integer and float images at 255 (a 0-65535 ramp comes
out almost white, a float image in [0, 1] black). Packing scales them instead (``to_8bit``), and a reader decoding a
member kept as it is (``dataio index`` adopts tars without re-encoding) must give the same levels (``rgb``).
"""

from __future__ import annotations

import numpy as np
from PIL import Image

WIDE_MODES = ("I", "F")  # and every "I;16*": more than 8 bits a channel


def wide(image: Image.Image) -> bool:
    """Whether ``image`` holds more than 8 bits a channel (PIL would clip it)."""
    return image.mode in WIDE_MODES or image.mode.startswith("I;16")


def to_8bit(image: Image.Image) -> Image.Image:
    """A 16-bit, 32-bit integer or float single-channel image scaled to 8-bit ``L``; PIL's own conversion clips.

    PIL's ``convert("L")`` clips these modes at 255 (a 0-65535 ramp comes out
    almost white, a float image in [0, 1] black). The rule, per mode:

    - ``I;16*``: 16-bit, scaled by 255/65535.
    - ``I`` (32-bit integers; PIL also opens some 16-bit files so): if every
      value is in 0..65535, scaled by 255/65535 as 16-bit data; otherwise
      stretched from its minimum to its maximum.
    - ``F`` (float): if every finite value is in [0, 1], scaled by 255;
      otherwise stretched from its finite minimum to its finite maximum. NaN
      becomes 0 and infinities the ends of the range.

    A constant image outside those ranges becomes 0. Values are rounded to
    the nearest level.
    """
    values = np.asarray(image, dtype=np.float32)
    finite = values[np.isfinite(values)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    if image.mode == "F":
        fits = 0.0 <= low and high <= 1.0
        scale_low, scale_high = (0.0, 1.0) if fits else (low, high)
    else:
        fits = image.mode.startswith("I;16") or (0 <= low and high <= 65535)
        scale_low, scale_high = (0.0, 65535.0) if fits else (low, high)
    span = scale_high - scale_low
    values = np.nan_to_num(values, nan=scale_low, posinf=scale_high, neginf=scale_low)
    scaled = (values - scale_low) * (255.0 / span) if span > 0 else np.zeros_like(values)
    return Image.fromarray(np.clip(np.rint(scaled), 0, 255).astype(np.uint8))


def rgb(image: Image.Image) -> Image.Image:
    """``image`` as RGB: wide modes scaled as packing scales them, the others converted by PIL."""
    if wide(image):
        image = to_8bit(image)
    return image if image.mode == "RGB" else image.convert("RGB")
