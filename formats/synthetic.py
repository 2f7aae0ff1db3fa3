"""Generate small ImageNet-layout folders of real-looking, learnable JPEGs.

Used by ``make demo``, the benchmarks and the tests: nothing is downloaded.
Images are photo-like (smooth low-frequency content, edges, sensor-like
noise), about ImageNet's typical size (~450x375, ~46 KB at quality 90), and
each class has its own colour palette and shape so a small model can learn
them. ``add_faulty_files`` adds the awkward files real ImageNet contains.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from dataio.formats.errors import UsageError

# (width, height) pairs in ImageNet's common aspect ratios.
_SIZES = ((500, 375), (375, 500), (500, 333), (450, 375), (400, 400), (500, 400))


@dataclass(frozen=True, kw_only=True)
class SyntheticImagesConfig:
    """What to generate: ``num_classes`` folders of ``images_per_class`` JPEGs."""

    num_classes: int = 10
    images_per_class: int = 100
    quality: int = 90
    seed: int = 0

    def __post_init__(self) -> None:
        if self.num_classes < 1 or self.images_per_class < 1:
            raise ValueError("num_classes and images_per_class must be >= 1")
        if not 1 <= self.quality <= 100:
            raise ValueError(f"quality must be in 1..100, got {self.quality}")


def class_name(index: int) -> str:
    """WordNet-id-like folder name for a class index."""
    return f"n{index:08d}"


def synthetic_image(label: int, rng: np.random.Generator) -> Image.Image:
    """One photo-like RGB image whose palette and shape depend on ``label``."""
    width, height = _SIZES[int(rng.integers(len(_SIZES)))]
    hue = np.array([(label * 0.37) % 1.0, (label * 0.61 + 0.3) % 1.0, (label * 0.17 + 0.6) % 1.0])
    base = rng.uniform(0.2, 0.8, size=(6, 8, 3)) * 0.5 + hue * 0.5
    field = Image.fromarray((base * 255).astype(np.uint8)).resize((width, height), Image.BICUBIC)
    draw = ImageDraw.Draw(field)
    colour = tuple(int(c) for c in (255 * (1.0 - hue)))
    for _ in range(int(rng.integers(2, 5))):
        x0, y0 = int(rng.integers(0, width * 2 // 3)), int(rng.integers(0, height * 2 // 3))
        x1, y1 = x0 + int(rng.integers(width // 6, width // 2)), y0 + int(rng.integers(height // 6, height // 2))
        shape = label % 3
        if shape == 0:
            draw.ellipse((x0, y0, x1, y1), fill=colour)
        elif shape == 1:
            draw.rectangle((x0, y0, x1, y1), fill=colour)
        else:
            draw.polygon([(x0, y1), ((x0 + x1) // 2, y0), (x1, y1)], fill=colour)
    pixels = np.asarray(field, dtype=np.int16)
    texture = rng.normal(0.0, 7.0, size=((height + 1) // 2, (width + 1) // 2, 1))
    texture = np.repeat(np.repeat(texture, 2, axis=0), 2, axis=1)[:height, :width]
    fine = rng.normal(0.0, 2.5, size=(height, width, 3))
    pixels = np.clip(pixels + texture + fine, 0, 255).astype(np.uint8)
    return Image.fromarray(pixels, "RGB")


def jpeg_bytes(image: Image.Image, quality: int = 90) -> bytes:
    """Encode ``image`` as a baseline JPEG."""
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


def write_image_folder(root: str | Path, config: SyntheticImagesConfig = SyntheticImagesConfig()) -> Path:
    """Write an ImageNet-layout folder ``root/<class>/<name>.JPEG``; returns ``root``."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise UsageError(f"output {root} exists and is not a folder")
    rng = np.random.default_rng(config.seed)
    for label in range(config.num_classes):
        folder = root / class_name(label)
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(config.images_per_class):
            image = synthetic_image(label, rng)
            (folder / f"{class_name(label)}_{i:05d}.JPEG").write_bytes(jpeg_bytes(image, config.quality))
    return root


def add_faulty_files(root: str | Path, seed: int = 1) -> dict[str, str]:
    """Add the awkward files of real ImageNet to the first class folder.

    Returns a map from relative path to what the file is: ``cmyk``,
    ``grayscale``, ``png_named_jpeg``, ``exif_rotated`` (all must be kept and
    converted), ``truncated`` and ``empty`` (must be rejected), ``not_image``
    (must be ignored).
    """
    root = Path(root)
    folder = sorted(p for p in root.iterdir() if p.is_dir())[0]
    rng = np.random.default_rng(seed)
    rgb = synthetic_image(0, rng)
    written: dict[str, str] = {}

    def put(name: str, data: bytes, kind: str) -> None:
        (folder / name).write_bytes(data)
        written[f"{folder.name}/{name}"] = kind

    cmyk = io.BytesIO()
    rgb.convert("CMYK").save(cmyk, format="JPEG", quality=90)
    put("zz_cmyk.JPEG", cmyk.getvalue(), "cmyk")
    put("zz_gray.JPEG", jpeg_bytes(rgb.convert("L")), "grayscale")
    png = io.BytesIO()
    rgb.save(png, format="PNG")
    put("zz_png.JPEG", png.getvalue(), "png_named_jpeg")
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90 degrees clockwise to display
    rotated = io.BytesIO()
    rgb.save(rotated, format="JPEG", quality=90, exif=exif.tobytes())
    put("zz_exif.JPEG", rotated.getvalue(), "exif_rotated")
    full = jpeg_bytes(rgb)
    put("zz_truncated.JPEG", full[: len(full) // 3], "truncated")
    put("zz_empty.JPEG", b"", "empty")
    (folder / "README.txt").write_text("not an image\n")
    (folder / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    written[f"{folder.name}/README.txt"] = "not_image"
    written[f"{folder.name}/.DS_Store"] = "not_image"
    return written
