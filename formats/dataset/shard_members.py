"""The members of a shard sample that a reader may decode, each with an explicit handler.

A shard is input: anyone can put ``KEY.pyd``, ``KEY.pickle`` or ``KEY.pth``
members next to the images. webdataset's default decoder set
(``.decode("pil")`` and the like) unpickles those, or ``torch.load``s them,
and a crafted pickle runs code in the reader. So no reader here uses a
default decoder set: each decodes only the members it names, with the
handlers below (an image through PIL, ``.cls`` as an ASCII integer,
``.json`` through ``json.loads``, ``.txt`` as UTF-8), and every other member is ignored
unread (``wanted_member`` lets a tar reader skip its bytes).
"""

from __future__ import annotations

import io
import json
from typing import Any

from PIL import Image

from dataio.formats.errors import SampleError
from dataio.formats.limits import MAX_PIXELS

# in order of preference when a sample has more than one; WebP where PIL decodes it (img2dataset writes it)
IMAGE_MEMBERS = ("jpg", "jpeg", "png", "webp")
LABEL_MEMBER = "cls"
META_MEMBER = "json"
CAPTION_MEMBER = "txt"  # an image-text pair's caption (img2dataset, LAION): UTF-8 text
MEMBERS = (*IMAGE_MEMBERS, LABEL_MEMBER, META_MEMBER, CAPTION_MEMBER)
MAX_LABEL_BYTES = 64  # a class index is a few digits; anything longer is not one


def member_extension(name: str) -> str:
    """``"dir/000001.jpg"`` -> ``"jpg"``: what follows the first dot of the base name, lower-case."""
    base = name.rsplit("/", 1)[-1]
    dot = base.find(".")
    return base[dot + 1:].lower() if dot > 0 else ""


def wanted_member(name: str) -> bool:
    """Whether a reader may read tar member ``name`` at all (images, ``.cls``, ``.json``)."""
    return member_extension(name) in MEMBERS


def decode_image(data: bytes) -> Image.Image:
    """Encoded image bytes -> a loaded RGB PIL image; raises ValueError/OSError on bad or oversized data."""
    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
        if width * height > MAX_PIXELS:
            raise ValueError(f"header claims {width}x{height} pixels (limit {MAX_PIXELS})")
        return image.convert("RGB")


def decode_label(data: bytes) -> int:
    """A ``.cls`` member: an ASCII decimal integer; raises ValueError otherwise."""
    if len(data) > MAX_LABEL_BYTES:
        raise ValueError(f".cls member of {len(data)} bytes is not a class index")
    try:
        return int(data.decode("ascii").strip())
    except UnicodeDecodeError:
        raise ValueError(".cls member is not ASCII") from None


def decode_meta(data: bytes) -> Any:
    """A ``.json`` member, through ``json.loads`` (data, never code); raises ValueError if it is not JSON."""
    try:
        return json.loads(data)
    except (UnicodeDecodeError, RecursionError) as e:
        raise ValueError(f".json member is not JSON ({e})") from None


def decode_sample(sample: dict[str, Any]) -> tuple[Image.Image, int]:
    """A webdataset sample dict -> ``(RGB image, label)``; looks at no member but the image and ``.cls``.

    Raises ``SampleError`` naming the shard and key when either is missing
    or does not decode.
    """
    shard, key = str(sample.get("__url__", "?")), str(sample.get("__key__", "?"))
    name = next((ext for ext in IMAGE_MEMBERS if ext in sample), None)
    if name is None or LABEL_MEMBER not in sample:
        raise SampleError(shard, key, f"needs an image ({', '.join(IMAGE_MEMBERS)}) and a .cls member")
    try:
        return decode_image(sample[name]), decode_label(sample[LABEL_MEMBER])
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError) as e:
        raise SampleError(shard, key, f"cannot decode ({type(e).__name__}: {e})") from None
