"""Generated image-text pairs whose captions say what is drawn, so a CLIP model can learn the pairing.

Each sample is a photo-like picture (``synthetic.textured_photo``'s field, texture and grain, recoloured
to a named background colour) holding one or two shapes of named colours and kinds, captioned e.g. "a
red circle and a blue square on a green background". Shapes are large and kept near the centre of their
half of the picture, so a random crop (open_clip trains on 90-100% of the area; torchvision's default
goes down to 8%) still shows most of them. A sample depends only on ``(seed, index)``, so every layout
(``synthetic_pair_writers``) holds the same pairs and any subset can be regenerated.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, features

from dataio.formats.errors import ConfigError
from dataio.formats.images.synthetic import PHOTO_CLASSES, PhotoClass, textured_photo

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (205, 35, 35), "green": (45, 160, 55), "blue": (35, 70, 205), "yellow": (235, 215, 45),
    "purple": (135, 55, 165), "orange": (240, 135, 25), "white": (238, 238, 238), "black": (22, 22, 22),
}
KINDS = ("circle", "square", "triangle", "cross")
TEMPLATES = ("{shapes} on {background} background", "a photo of {shapes} on {background} background",
             "{shapes} against {background} background", "a picture showing {shapes}, {background} background")
# Tests' pictures: a few kilobytes, decoded in well under a millisecond.
TINY = PhotoClass(((96, 72), (72, 96), (80, 80), (112, 84)), 2.5, 90)
PAIR_PHOTO_CLASSES: dict[str, PhotoClass] = {"tiny": TINY, **PHOTO_CLASSES}
IMAGE_FORMATS = {"jpg": "JPEG", "png": "PNG", "webp": "WEBP"}  # img2dataset's encode_format -> PIL's format
# The awkward pairs of real caption data (one sample each): what a reader must refuse, naming the sample.
BAD_PAIRS = ("caption_not_utf8", "empty_caption", "missing_caption", "huge_caption", "json_not_json",
             "missing_image", "truncated_image")
HUGE_CAPTION_BYTES = 1 << 20
CHROMA_KEPT = 0.3  # of the field's colour variation: its light variation and texture are all kept


def with_article(words: str) -> str:
    return f"{'an' if words[0] in 'aeiou' else 'a'} {words}"


@dataclass(frozen=True)
class Shape:
    colour: str
    kind: str

    @property
    def words(self) -> str:
        return with_article(f"{self.colour} {self.kind}")


@dataclass(frozen=True)
class Scene:
    """What one picture shows, and the template its caption uses."""

    background: str
    shapes: tuple[Shape, ...]
    template: int

    @property
    def caption(self) -> str:
        shapes = " and ".join(shape.words for shape in self.shapes)
        return TEMPLATES[self.template].format(shapes=shapes, background=with_article(self.background))


@dataclass(frozen=True, kw_only=True)
class SyntheticPairsConfig:
    """What to generate: ``count`` pairs of ``photo_class`` size (``tiny`` for tests, ``small`` ~50 KB,
    ``imagenet`` ~110 KB, ``camera`` 5-12 MP), drawn from the first ``colours`` colours and ``kinds`` kinds
    with up to ``max_shapes`` shapes (fewer of each: an easier pairing), encoded as ``image_format``."""

    count: int = 100
    photo_class: str = "tiny"
    seed: int = 0
    colours: int = len(COLOURS)
    kinds: int = len(KINDS)
    max_shapes: int = 2
    templates: int = len(TEMPLATES)  # caption wordings drawn from (1: one caption per scene, as recall counts them)
    image_format: str = "jpg"
    samples_per_shard: int = 10_000  # img2dataset's number_sample_per_shard; rows per Hub Parquet file
    failed_fraction: float = 0.0  # img2dataset: share of rows of failed downloads, in its .parquet only
    bad_pairs: tuple[str, ...] = ()  # kinds of BAD_PAIRS, each given to one sample

    def __post_init__(self) -> None:
        if self.count < 1 or self.samples_per_shard < 1:
            raise ConfigError(f"{{0}} and {{1}} must be >= 1, got {self.count} and {self.samples_per_shard}",
                              "count", "samples_per_shard")
        if self.photo_class not in PAIR_PHOTO_CLASSES:
            raise ConfigError(f"{{0}} must be one of {', '.join(PAIR_PHOTO_CLASSES)}, got {self.photo_class!r}",
                              "photo_class")
        if not 2 <= self.colours <= len(COLOURS):  # a shape's colour differs from its background's
            raise ConfigError(f"{{0}} must be in 2..{len(COLOURS)}, got {self.colours}", "colours")
        if not 1 <= self.templates <= len(TEMPLATES):
            raise ConfigError(f"{{0}} must be in 1..{len(TEMPLATES)}, got {self.templates}", "templates")
        if not 1 <= self.kinds <= len(KINDS) or self.max_shapes not in (1, 2):
            raise ConfigError(f"{{0}} must be in 1..{len(KINDS)} and {{1}} 1 or 2, got {self.kinds} and "
                              f"{self.max_shapes}", "kinds", "max_shapes")
        if self.image_format not in IMAGE_FORMATS:
            raise ConfigError(f"{{0}} must be one of {', '.join(IMAGE_FORMATS)}, got {self.image_format!r}",
                              "image_format")
        if self.image_format == "webp" and not features.check("webp"):
            raise ConfigError("{0} webp: this Pillow was built without WebP", "image_format")
        if not 0.0 <= self.failed_fraction < 1.0:
            raise ConfigError(f"{{0}} must be in [0, 1), got {self.failed_fraction}", "failed_fraction")
        unknown = [kind for kind in self.bad_pairs if kind not in BAD_PAIRS]
        if unknown or len(set(self.bad_pairs)) != len(self.bad_pairs):
            raise ConfigError(f"{{0}} must be distinct kinds of {', '.join(BAD_PAIRS)}, got {list(self.bad_pairs)}",
                              "bad_pairs")
        if len(self.bad_pairs) > self.count:
            raise ConfigError(f"{{0}}: {len(self.bad_pairs)} bad pairs need count >= {len(self.bad_pairs)}",
                              "bad_pairs")

    def bad_indices(self) -> dict[int, str]:
        """``{sample index: bad kind}``: the kinds spread evenly over the samples, in order (distinct indices:
        the step ``count / (n + 1)`` is at least 1 for ``n < count``, and ``n == count`` gives ``0..n-1``)."""
        n = len(self.bad_pairs)
        return {self.count * (i + 1) // (n + 1): kind for i, kind in enumerate(self.bad_pairs)}


def sample_rng(seed: int, index: int) -> np.random.Generator:
    """The generator of sample ``index``: its own stream, whatever else is generated and in which order."""
    return np.random.default_rng([seed, index])


def draw_scene(rng: np.random.Generator, config: SyntheticPairsConfig) -> Scene:
    """A background colour, one or two shapes (no two alike, none of the background's colour), a template."""
    colours, kinds = list(COLOURS)[:config.colours], KINDS[:config.kinds]
    background = colours[int(rng.integers(len(colours)))]
    others = [c for c in colours if c != background]
    count = int(rng.integers(1, config.max_shapes + 1))
    if count == 2 and len(others) * len(kinds) < 2:
        count = 1
    shapes: list[Shape] = []
    while len(shapes) < count:
        shape = Shape(others[int(rng.integers(len(others)))], kinds[int(rng.integers(len(kinds)))])
        if shape not in shapes:
            shapes.append(shape)
    return Scene(background, tuple(shapes), int(rng.integers(config.templates)))


def _shape_mask(size: tuple[int, int], shapes: int, rng: np.random.Generator, kinds: tuple[str, ...]) -> list[Image.Image]:
    """One soft-edged mask per shape: each centred in its half (left/right, or top/bottom when portrait) with
    some jitter, 30-55% of the short side across (one shape: 40-65%)."""
    width, height = size
    short = min(width, height)
    masks = []
    for i, kind in enumerate(kinds):
        extent = short * (rng.uniform(0.40, 0.65) if shapes == 1 else rng.uniform(0.30, 0.45))
        if shapes == 1:
            cx, cy = width / 2, height / 2
        elif width >= height:
            cx, cy = width * (0.27 + 0.46 * i), height / 2
        else:
            cx, cy = width / 2, height * (0.27 + 0.46 * i)
        cx += rng.uniform(-0.06, 0.06) * short
        cy += rng.uniform(-0.06, 0.06) * short
        r = extent / 2
        box = (cx - r, cy - r, cx + r, cy + r)
        mask = Image.new("L", size, 0)
        draw = ImageDraw.Draw(mask)
        if kind == "circle":
            draw.ellipse(box, fill=255)
        elif kind == "square":
            draw.rectangle(box, fill=255)
        elif kind == "triangle":
            draw.polygon([(cx - r, cy + r), (cx, cy - r), (cx + r, cy + r)], fill=255)
        else:  # a cross: two bars a third of the extent thick
            t = extent / 6
            draw.rectangle((cx - r, cy - t, cx + r, cy + t), fill=255)
            draw.rectangle((cx - t, cy - r, cx + t, cy + r), fill=255)
        masks.append(mask.filter(ImageFilter.GaussianBlur(max(0.6, short / 400))))  # antialiased edges
    return masks


def render_scene(scene: Scene, rng: np.random.Generator, photo_class: PhotoClass) -> Image.Image:
    """The picture of ``scene``: ``textured_photo``'s variation around the background colour, and each shape
    in its colour with the same texture and grain (so the file is as large and as hard to decode as a photo)."""
    field = np.asarray(textured_photo(0, rng, photo_class), dtype=np.float32)
    variation = field - field.mean(axis=(0, 1))
    light = variation.mean(axis=2, keepdims=True)
    variation = light + CHROMA_KEPT * (variation - light)  # a "red" background stays red across the picture
    pixels = np.asarray(COLOURS[scene.background], dtype=np.float32) + variation
    masks = _shape_mask((field.shape[1], field.shape[0]), len(scene.shapes), rng,
                        tuple(shape.kind for shape in scene.shapes))
    for shape, mask in zip(scene.shapes, masks, strict=True):
        alpha = np.asarray(mask, dtype=np.float32)[..., None] / 255.0
        pixels = pixels * (1.0 - alpha) + (np.asarray(COLOURS[shape.colour], dtype=np.float32) + variation) * alpha
    pixels += rng.normal(0.0, photo_class.grain, size=pixels.shape).astype(np.float32)  # the grain's colour back
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")


def encode(image: Image.Image, image_format: str, quality: int) -> bytes:
    buffer = io.BytesIO()
    if image_format == "png":
        image.save(buffer, format="PNG")
    else:
        image.save(buffer, format=IMAGE_FORMATS[image_format], quality=quality)
    return buffer.getvalue()


@dataclass(frozen=True)
class Pair:
    """One generated sample: the encoded picture, its caption and its pixel size."""

    index: int
    image: bytes
    caption: str
    scene: Scene
    size: tuple[int, int]


def make_pair(index: int, config: SyntheticPairsConfig) -> Pair:
    """Sample ``index`` of ``config`` (the same bytes for the same seed and index)."""
    rng = sample_rng(config.seed, index)
    scene = draw_scene(rng, config)
    kind = PAIR_PHOTO_CLASSES[config.photo_class]
    picture = render_scene(scene, rng, kind)
    return Pair(index, encode(picture, config.image_format, kind.quality), scene.caption, scene, picture.size)


def huge_caption(caption: str) -> str:
    """``caption`` repeated to ``HUGE_CAPTION_BYTES`` (a scraped page pasted into the alt text)."""
    return (caption + " ") * (HUGE_CAPTION_BYTES // (len(caption) + 1)) + caption[:HUGE_CAPTION_BYTES % (len(caption) + 1)]


def not_utf8(caption: str) -> bytes:
    """``caption`` with a Latin-1 "é" in it: bytes that do not decode as UTF-8."""
    return (caption + " caf\u00e9").encode("latin-1")
