"""COCO data to try things on: photos with coloured shapes at known boxes and masks, and their instances JSON.

Each photo has a grey background with smooth light and dark patches (no colour)
and up to ``shapes`` shapes that neither overlap nor touch: rectangles and
seven-cornered polygons (segmentations as COCO polygons) and ellipses (as
COCO's compressed RLE of the drawn mask). A shape's category is its colour,
six hues 60 degrees apart (so a model can learn them, and a test can find each
shape again in any crop by its colour); the category ids have gaps, as COCO's.
Boxes are the drawn masks' tight bounds (xywh).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from dataio.formats.file_gate import open_new, write_new

COLOURS = np.array([(225, 35, 35), (35, 200, 35), (35, 35, 225), (215, 215, 30), (215, 35, 215), (30, 205, 205)])
CATEGORIES = ((3, "red"), (7, "green"), (12, "blue"), (20, "yellow"), (41, "magenta"), (90, "cyan"))
KINDS = ("rect", "ellipse", "polygon")


@dataclass(frozen=True, kw_only=True)
class SyntheticCocoConfig:
    """How many photos, their sizes (cycled), shapes per photo, photos left without shapes, the seed."""

    images: int = 12
    sizes: tuple[tuple[int, int], ...] = ((640, 480), (480, 640), (500, 375))
    shapes: int = 4
    empty: int = 0  # photos with no shape (and no annotation), at the end
    quality: int = 92
    seed: int = 0
    # grey texture at two scales and sensor grain of this sigma (0: none), as formats.images.synthetic's photos:
    # the entropy, and so the file size, of real photos (12 at quality 95: ~100 KB a 640x480 photo, as COCO's);
    # grey, so no pixel changes hue and each shape is still found by its colour
    grain: float = 0.0

    def __post_init__(self) -> None:
        if self.images < 1 or not 1 <= self.shapes <= len(COLOURS) or not 0 <= self.empty <= self.images:
            raise ValueError("images >= 1, shapes in 1..6 and empty in 0..images")
        if any(min(size) < 32 for size in self.sizes):
            raise ValueError("photo sides must be >= 32")


def write_coco_folder(root: str | Path, config: SyntheticCocoConfig = SyntheticCocoConfig()) -> tuple[Path, Path]:
    """Photos in ``root/images`` and ``root/instances.json``; returns (images folder, JSON path)."""
    root = Path(root)
    folder = root / "images"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(config.seed)
    images, annotations = [], []
    for index in range(config.images):
        width, height = config.sizes[index % len(config.sizes)]
        count = 0 if index >= config.images - config.empty else config.shapes
        pixels, shapes = shape_photo(width, height, rng, count)
        if config.grain:
            pixels = _grained(pixels, rng, config.grain)
        name = f"{index:06d}.jpg"
        with open_new(folder / name) as f:  # created new: PIL given a path would write through a planted link
            Image.fromarray(pixels).save(f, "JPEG", quality=config.quality)
        images.append({"id": 1000 + index, "file_name": name, "width": width, "height": height})
        for colour, kind, mask, polygon in shapes:
            annotations.append(_annotation(len(annotations) + 1, 1000 + index, colour, kind, mask, polygon))
    document = {"images": images, "annotations": annotations,
                "categories": [{"id": cid, "name": name, "supercategory": "shape"} for cid, name in CATEGORIES]}
    path = root / "instances.json"
    write_new(path, json.dumps(document).encode())
    return folder, path


def shape_photo(width: int, height: int, rng: np.random.Generator,
                count: int) -> tuple[np.ndarray, list[tuple[int, str, np.ndarray, list[float] | None]]]:
    """(H, W, 3) uint8 pixels and each shape's (colour, kind, mask (H, W) uint8, polygon or None)."""
    light = rng.uniform(95, 160, (6, 8)).astype(np.uint8)
    background = np.asarray(Image.fromarray(light).resize((width, height), Image.BILINEAR))
    image = Image.fromarray(np.repeat(background[..., None], 3, axis=2))
    draw = ImageDraw.Draw(image)
    placed: list[tuple[float, float, float, float]] = []
    shapes = []
    colours = rng.permutation(len(COLOURS))
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
        colour = int(colours[len(placed) - 1])
        kind = KINDS[int(rng.integers(len(KINDS)))]
        mask = Image.new("L", (width, height), 0)
        polygon = _outline(kind, (x0, y0, x0 + w, y0 + h), rng)
        for target, fill in ((draw, tuple(int(v) for v in COLOURS[colour])), (ImageDraw.Draw(mask), 1)):
            if kind == "ellipse":
                target.ellipse((x0, y0, x0 + w, y0 + h), fill=fill)
            elif kind == "rect":
                target.rectangle((round(x0), round(y0), round(x0 + w) - 1, round(y0 + h) - 1), fill=fill)
            else:
                target.polygon(list(zip(polygon[::2], polygon[1::2], strict=True)), fill=fill)
        shapes.append((colour, kind, np.asarray(mask), polygon if kind != "ellipse" else None))
    return np.asarray(image), shapes


def _grained(pixels: np.ndarray, rng: np.random.Generator, grain: float) -> np.ndarray:
    """``pixels`` plus grey texture (coarse and fine) and grain, the same in the three channels."""
    height, width = pixels.shape[:2]
    noise = rng.normal(0.0, grain, size=(height, width)).astype(np.float32)
    for scale, amplitude in ((8, 10.0), (2, 6.0)):
        texture = rng.normal(0.0, amplitude, size=(height // scale + 1, width // scale + 1)).astype(np.float32)
        noise += np.asarray(Image.fromarray(texture).resize((width, height), Image.BILINEAR))
    return np.clip(pixels + noise[..., None], 0, 255).astype(np.uint8)


def _outline(kind: str, box: tuple[float, float, float, float], rng: np.random.Generator) -> list[float]:
    """A rectangle's corners (whole pixels, as drawn) or a star-like polygon's 7 corners, flattened x, y."""
    x0, y0, x1, y1 = box
    if kind == "rect":
        left, top, right, bottom = round(x0), round(y0), round(x1), round(y1)
        return [left, top, right, top, right, bottom, left, bottom]
    angles = np.sort(rng.uniform(0, 2 * np.pi, 7))
    radii = rng.uniform(0.7, 1.0, 7)
    cx, cy, rx, ry = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2, (y1 - y0) / 2
    return [float(v) for a, r in zip(angles, radii, strict=True)
            for v in (cx + rx * r * np.cos(a), cy + ry * r * np.sin(a))]


def _annotation(ann_id: int, image_id: int, colour: int, kind: str, mask: np.ndarray,
                polygon: list[float] | None) -> dict:
    rows, columns = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    x0, y0, x1, y1 = int(columns[0]), int(rows[0]), int(columns[-1]) + 1, int(rows[-1]) + 1
    if polygon is not None:
        segmentation: object = [polygon]
    else:
        segmentation = {"size": list(mask.shape), "counts": _rle_string(mask)}
    return {"id": ann_id, "image_id": image_id, "category_id": CATEGORIES[colour][0], "iscrowd": 0,
            "bbox": [x0, y0, x1 - x0, y1 - y0], "area": int(mask.sum()), "segmentation": segmentation}


def _rle_string(mask: np.ndarray) -> str:
    """COCO's compressed RLE of a (H, W) 0/1 mask (column-major runs, starting with a run of zeros)."""
    from dataio.formats.coco.coco_targets import pycocotools_mask  # lazy: optional

    return pycocotools_mask().encode(np.asfortranarray(mask.astype(np.uint8)))["counts"].decode("ascii")
