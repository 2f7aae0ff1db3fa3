"""What the detection source layers (YOLO, Pascal VOC, Hub Parquet) share: their image files and headers, and
the COCO document they build, checked by ``coco_json`` as a COCO JSON is and packed by ``coco_convert``.

Each layer turns its layout into a COCO document (images with their size, annotations with an xywh ``bbox`` in
the image's pixels, categories with ids and names), so every box passes the checks a COCO box does (finite,
inside its image, at least 1 px each way once clipped) and the kind's one packer stores it: the detection loader
reads the result unchanged. What the layout itself gets wrong (a malformed label line, an XML that does not
parse) rejects that image with a one-line reason, listed in ``rejected.jsonl`` as COCO's rejections are.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from dataio.formats.coco.coco_json import CocoIndex, coco_index
from dataio.formats.file_gate import open_input
from dataio.formats.images.image_names import IMAGE_EXTENSIONS
from dataio.formats.images.image_prepare import EXIF_ORIENTATION
from dataio.formats.images.image_tree import errno_text

MAX_LABEL_FILE_BYTES = 16 << 20  # one image's label file (YOLO .txt, VOC .xml): real ones are a few KB
# what is read of an image for its size and orientation: JPEG's EXIF segment (at most 64 KiB) and frame header
# come first, PNG's IHDR at byte 16; the packer reads the whole file later, checked
HEADER_BYTES = 1 << 20


@dataclass
class SourceDocument:
    """A COCO document being built by a source layer, and the images it rejected as (where, reason)."""

    categories: list[tuple[int, str]]
    images: list[dict[str, Any]] = field(default_factory=list)
    annotations: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)

    def add_image(self, file_name: str, width: int, height: int, objects: list[tuple[int, list[float], bool]],
                  image_id: int | None = None) -> None:
        """An image (its path under the source root, or its row), its objects (category id, xywh box, crowd flag)
        and its id (default: numbered from 1 in order)."""
        image_id = len(self.images) + 1 if image_id is None else image_id
        self.images.append({"id": image_id, "file_name": file_name, "width": width, "height": height})
        for category, box, crowd in objects:
            self.annotations.append({"id": len(self.annotations) + 1, "image_id": image_id, "category_id": category,
                                     "bbox": box, "iscrowd": int(crowd)})

    def index(self, where: str, source: str, annotations: str, identity: Any = None) -> CocoIndex:
        """The checked index, its manifest origin named ``source`` (the layout) and ``annotations`` (what held
        them); its digest covers everything read (and ``identity``: what else names the source, as JSON), so a
        resumed run over changed labels starts again."""
        document = {"images": self.images, "annotations": self.annotations,
                    "categories": [{"id": cid, "name": name} for cid, name in self.categories]}
        digest = hashlib.sha256(json.dumps([document, identity] if identity is not None else document,
                                           sort_keys=True).encode()).hexdigest()
        index = coco_index(document, where, annotations)
        index.rejected[:0] = self.rejected
        index.origin = {"source": source, "annotations": annotations, "annotations_sha256": digest}
        return index


def image_files(root: Path) -> list[str]:
    """The image files under ``root``, as sorted paths relative to it ('/'-separated; links to folders not
    followed, as ``image_tree`` walks a source)."""
    found = []
    for folder, folders, files in os.walk(root):
        folders.sort()
        relative = os.path.relpath(folder, root)
        found += [name if relative == "." else f"{relative}/{name}".replace(os.sep, "/")
                  for name in files if name.lower().endswith(IMAGE_EXTENSIONS)]
    return sorted(found)


def upright_size(path: Path, root: Path) -> tuple[int, int, int]:
    """(width, height, EXIF orientation) of the image at ``path`` as a viewer shows it (turned upright), from
    its header; OSError with the reason in one line."""
    try:
        with open_input(path, root=root) as file:
            head = file.read(HEADER_BYTES)
        with Image.open(io.BytesIO(head)) as image:  # the header only: PIL reads pixels on demand
            width, height = image.size
            orientation = image.getexif().get(EXIF_ORIENTATION, 1)
    except OSError as e:
        raise OSError(errno_text(e) if e.errno else f"not an image PIL reads ({e})") from None
    except Exception as e:  # noqa: BLE001 - a damaged header: PIL raises what it raises, named in one line
        raise OSError(f"not an image PIL reads ({type(e).__name__}: {e})") from None
    return (height, width, orientation) if orientation in (5, 6, 7, 8) else (width, height, orientation)


def stored_frame(box: list[float], width: int, height: int, orientation: int) -> list[float]:
    """An xyxy ``box`` of the upright image in the stored pixels of a file with a flip or a half turn in its EXIF
    (2, 3, 4): the packer turns annotations of a same-sized file upright with the pixels, as COCO's tools read
    files unturned; a quarter turn changes the size, which tells the packer the boxes are upright already."""
    x0, y0, x1, y1 = box
    if orientation == 2:
        return [width - x1, y0, width - x0, y1]
    if orientation == 3:
        return [width - x1, height - y1, width - x0, height - y0]
    if orientation == 4:
        return [x0, height - y1, x1, height - y0]
    return box


def xywh(box: list[float]) -> list[float]:
    """An xyxy box as COCO's [x, y, width, height]."""
    return [box[0], box[1], box[2] - box[0], box[3] - box[1]]
