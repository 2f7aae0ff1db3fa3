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
from dataio.formats.file_gate import write_new

# (width, height) pairs in ImageNet's common aspect ratios.
_SIZES = ((500, 375), (375, 500), (500, 333), (450, 375), (400, 400), (500, 400))
# Camera photos: 5 to 12 MP in the usual sensor ratios (portrait too).
_CAMERA_SIZES = ((4000, 3000), (3264, 2448), (4032, 3024), (3000, 4000), (2592, 1944))


@dataclass(frozen=True)
class PhotoClass:
    """A kind of photo by size: pixel sizes, sensor grain (sigma) and JPEG quality.

    Measured here (PIL, libjpeg-turbo): ``small`` ~40-60 KB, ``imagenet``
    ~100-130 KB (ImageNet's mean is ~110 KB), ``camera`` ~2-4 MB.
    """

    sizes: tuple[tuple[int, int], ...]
    grain: float
    quality: int


PHOTO_CLASSES = {
    "small": PhotoClass(_SIZES, 2.5, 90),
    "imagenet": PhotoClass(_SIZES, 12.0, 95),
    "camera": PhotoClass(_CAMERA_SIZES, 5.0, 93),
}


@dataclass(frozen=True, kw_only=True)
class SyntheticImagesConfig:
    """What to generate: ``num_classes`` folders of ``images_per_class`` JPEGs."""

    num_classes: int = 10
    images_per_class: int = 100
    quality: int = 90  # for photo_class "small"; the other classes carry their own
    seed: int = 0
    photo_class: str = "small"  # a key of PHOTO_CLASSES

    def __post_init__(self) -> None:
        if self.num_classes < 1 or self.images_per_class < 1:
            raise ValueError("num_classes and images_per_class must be >= 1")
        if self.photo_class not in PHOTO_CLASSES:
            raise ValueError(f"photo_class must be one of {', '.join(PHOTO_CLASSES)}, got {self.photo_class!r}")
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


def textured_photo(label: int, rng: np.random.Generator, photo_class: PhotoClass) -> Image.Image:
    """A photo-like image of a real photo's size and entropy: a class-coloured field, texture at two scales
    (detail that survives JPEG, as in real photos) and sensor grain."""
    width, height = photo_class.sizes[int(rng.integers(len(photo_class.sizes)))]
    hue = np.array([(label * 0.37) % 1.0, (label * 0.61 + 0.3) % 1.0, (label * 0.17 + 0.6) % 1.0])
    base = rng.uniform(0.2, 0.8, size=(6, 8, 3)) * 0.5 + hue * 0.5
    pixels = np.asarray(Image.fromarray((base * 255).astype(np.uint8)).resize((width, height), Image.BICUBIC),
                        dtype=np.float32)
    for scale, amplitude in ((8, 10.0), (2, 6.0)):
        texture = rng.normal(0.0, amplitude, size=(height // scale + 1, width // scale + 1)).astype(np.float32)
        pixels += np.asarray(Image.fromarray(texture).resize((width, height), Image.BILINEAR))[..., None]
    pixels += rng.normal(0.0, photo_class.grain, size=(height, width, 3)).astype(np.float32)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")


def photo_bytes(label: int, rng: np.random.Generator, photo_class: str = "small", quality: int = 90) -> bytes:
    """One JPEG of ``photo_class`` (``quality`` applies to "small", whose pixels are ``synthetic_image``'s)."""
    if photo_class == "small":
        return jpeg_bytes(synthetic_image(label, rng), quality)
    kind = PHOTO_CLASSES[photo_class]
    return jpeg_bytes(textured_photo(label, rng, kind), kind.quality)


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
            data = photo_bytes(label, rng, config.photo_class, config.quality)
            write_new(folder / f"{class_name(label)}_{i:05d}.JPEG", data)
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
        write_new(folder / name, data)
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
    write_new(folder / "README.txt", b"not an image\n")
    write_new(folder / ".DS_Store", b"\x00\x00\x00\x01Bud1")
    written[f"{folder.name}/README.txt"] = "not_image"
    written[f"{folder.name}/.DS_Store"] = "not_image"
    return written
