"""Photos with coloured shapes drawn at known boxes and masks, and a way to find each shape again by colour.

The background is grey with smooth light and dark patches (no colour), each
shape a saturated colour of its own, six hues 60 degrees apart. After any
crop, resize, warp or JPEG round trip a shape is found again as the pixels
whose colour is at least half its hue (``shape_pixels``): a pixel half covered
by the shape is where the output's edge lies. RandAugment's fill is grey too,
so it is never taken for a shape.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from dataio.formats.images.image_prepare import ImagePrepareConfig, PreparedImage, prepare_image

COLOURS = np.array([(225, 35, 35), (35, 200, 35), (35, 35, 225), (215, 215, 30), (215, 35, 215), (30, 205, 205)])
KINDS = ("rect", "ellipse", "polygon")


@dataclass(frozen=True)
class ShapePhoto:
    """One JPEG (restart markers, as packed) and its shapes: kind, colour index, tight box, mask (H, W)."""

    jpeg: bytes
    width: int
    height: int
    kinds: list[str]
    colours: np.ndarray  # (K,) index into COLOURS
    boxes: np.ndarray  # (K, 4) float64 xyxy, the masks' tight bounds
    masks: np.ndarray  # (K, H, W) uint8


def shape_photo(width: int, height: int, rng: np.random.Generator, count: int = 5) -> ShapePhoto:
    """A ``width`` x ``height`` photo with up to ``count`` shapes that neither overlap nor touch."""
    light = rng.uniform(95, 160, (6, 8)).astype(np.uint8)
    background = np.asarray(Image.fromarray(light).resize((width, height), Image.BILINEAR))
    image = Image.fromarray(np.repeat(background[..., None], 3, axis=2))
    draw = ImageDraw.Draw(image)
    placed: list[tuple[float, float, float, float]] = []
    kinds, colours, masks = [], [], []
    side = min(width, height)
    for _ in range(count * 20):
        if len(placed) == count:
            break
        w, h = rng.uniform(0.18, 0.4, 2) * side
        x0, y0 = rng.uniform(0, width - w), rng.uniform(0, height - h)
        gap = 0.03 * side
        if any(x0 < b[2] + gap and b[0] < x0 + w + gap and y0 < b[3] + gap and b[1] < y0 + h + gap for b in placed):
            continue
        placed.append((x0, y0, x0 + w, y0 + h))
        kind = KINDS[len(placed) % len(KINDS)]
        mask = Image.new("L", (width, height), 0)
        for target, fill in ((draw, tuple(int(v) for v in COLOURS[len(placed) - 1])), (ImageDraw.Draw(mask), 1)):
            _draw(target, kind, (x0, y0, x0 + w, y0 + h), fill, np.random.default_rng(len(placed)))
        kinds.append(kind)
        colours.append(len(placed) - 1)
        masks.append(np.asarray(mask))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=92)
    prepared = prepare_image(buffer.getvalue(), ImagePrepareConfig())
    assert isinstance(prepared, PreparedImage)
    stacked = np.stack(masks)
    return ShapePhoto(prepared.jpeg, width, height, kinds, np.array(colours), tight_boxes(stacked), stacked)


def _draw(draw: ImageDraw.ImageDraw, kind: str, box: tuple[float, float, float, float], fill: object,
          rng: np.random.Generator) -> None:
    x0, y0, x1, y1 = box
    if kind == "rect":
        draw.rectangle((round(x0), round(y0), round(x1) - 1, round(y1) - 1), fill=fill)
    elif kind == "ellipse":
        draw.ellipse((x0, y0, x1, y1), fill=fill)
    else:  # a star-like polygon with 7 corners at random radii (not always convex)
        angles = np.sort(rng.uniform(0, 2 * np.pi, 7))
        radii = rng.uniform(0.7, 1.0, 7)
        cx, cy, rx, ry = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2, (y1 - y0) / 2
        draw.polygon([(cx + rx * r * np.cos(a), cy + ry * r * np.sin(a))
                      for a, r in zip(angles, radii, strict=True)], fill=fill)


def tight_boxes(masks: np.ndarray) -> np.ndarray:
    """(K, 4) xyxy bounds of each mask's pixels (pixel i spans [i, i + 1))."""
    out = np.zeros((len(masks), 4))
    for k, mask in enumerate(masks):
        rows, columns = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
        if len(rows):
            out[k] = (columns[0], rows[0], columns[-1] + 1, rows[-1] + 1)
    return out


def shape_pixels(image: np.ndarray, colour: int) -> np.ndarray:
    """(H, W) bool: the pixels of (H, W, 3) ``image`` at least half of hue ``colour`` and nearest to it."""
    chroma = image.astype(np.float64) - image.mean(axis=2, keepdims=True)
    palette = COLOURS - COLOURS.mean(axis=1, keepdims=True)
    coverage = chroma @ palette.T / (palette**2).sum(axis=1)  # a blend a * colour + grey gives a
    return (coverage.argmax(axis=2) == colour) & (coverage[..., colour] >= 0.5)
