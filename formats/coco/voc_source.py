"""``dataio convert voc SRC OUT [--split NAME]``: a Pascal VOC folder read into COCO's index, packed as ``convert
coco`` packs.

The layout is VOC's (``VOCdevkit/VOC2012``): ``JPEGImages/ID.jpg``, ``Annotations/ID.xml`` (``size``, and per
object ``name``, ``difficult``, ``bndbox`` with ``xmin ymin xmax ymax``) and ``ImageSets/Main/SPLIT.txt`` listing
the ids of a split (torchvision's ``VOCDetection`` reads the same files). A folder with ``ImageSets/Main`` needs
``--split`` (train, val and trainval share their images: packing all of them would mix them); without one, every
``Annotations/*.xml`` is packed. The XML is parsed by ``voc_xml`` (a DOCTYPE refused: no entity is ever expanded).

Boxes: VOC's corners are 1-based pixel indices, inclusive; as detectron2 reads them (``pascal_voc.py``), xmin and
ymin lose 1 and a box from 1 to W spans the image, 0..W in COCO's frame. ``difficult`` objects are kept with the
crowd flag (``iscrowd``): VOC's evaluation ignores them (neither a hit nor a miss), as COCOeval ignores crowd
boxes, and the loader's ``crowd=False`` drops them from training targets. Classes: VOC's 20, in VOC's order
(torchvision's and detectron2's), when every XML in Annotations/ names only them; else the names of every XML
in Annotations/ sorted: the folder's files are read once for the class list, so each split gets the same labels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from dataio.formats.coco.coco_convert import CocoSummary, ConvertCocoConfig, convert_coco
from dataio.formats.coco.coco_json import CocoIndex
from dataio.formats.coco.detection_source import MAX_LABEL_FILE_BYTES, SourceDocument, xywh
from dataio.formats.coco.voc_xml import Element, parse_xml
from dataio.formats.errors import DataioError, UsageError
from dataio.formats.file_gate import FileRefused, read_input
from dataio.formats.images.image_tree import errno_text

VOC_CLASSES = ("aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow", "diningtable",
               "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train", "tvmonitor")


@dataclass(frozen=True, kw_only=True)
class ConvertVocConfig(ConvertCocoConfig):
    """``ConvertCocoConfig`` with ``images`` the VOC folder (holding JPEGImages/, Annotations/), ``annotations``
    its Annotations/ folder, and the split (an ``ImageSets/Main`` list; None: every annotation file)."""

    split: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.split is not None and (not self.split or "/" in self.split or self.split in (".", "..")):
            raise ValueError(f"split must be the name of an ImageSets/Main list, got {self.split!r}")


def voc_config(src: Path, out: Path, split: str | None = None, **options) -> ConvertVocConfig:
    """The config that packs the VOC folder ``src`` (``options``: ``ConvertCocoConfig``'s packing keywords)."""
    return ConvertVocConfig(images=src, annotations=Path(src) / "Annotations", out=out, split=split, **options)


def convert_voc(config: ConvertVocConfig) -> CocoSummary:
    """Pack the VOC folder ``config.images`` into ``config.out`` (``convert_coco``'s engine and output)."""
    return convert_coco(config, read_voc(config.images, config.split))


def _ids(src: Path, split: str | None) -> list[str]:
    """The image ids to pack: the split's list, or every annotation file's stem."""
    lists = src / "ImageSets" / "Main"
    if split is None:
        if lists.is_dir():
            names = sorted(p.stem for p in lists.glob("*.txt") if "_" not in p.stem)
            raise UsageError(f"{src}: ImageSets/Main lists splits ({', '.join(names[:8]) or 'none'}): give the one "
                             "to pack (--split)")
        return sorted(p.stem for p in (src / "Annotations").glob("*.xml"))
    try:
        text = read_input(lists / f"{split}.txt", MAX_LABEL_FILE_BYTES).decode("utf-8", "replace")
    except FileNotFoundError:
        raise UsageError(f"{src}: no ImageSets/Main/{split}.txt for --split {split}") from None
    except OSError as e:
        raise DataioError(f"{lists / f'{split}.txt'}: cannot read: {errno_text(e)}") from None
    return [line.split()[0] for line in text.splitlines() if line.strip()]


def read_voc(src: Path, split: str | None) -> CocoIndex:
    """The checked COCO index of the VOC folder ``src`` (its ``split``, when given)."""
    if not (src / "Annotations").is_dir() or not (src / "JPEGImages").is_dir():
        raise UsageError(f"{src}: not a Pascal VOC folder (it needs Annotations/ and JPEGImages/ folders)")
    wanted = _ids(src, split)
    roots, names = _folder(src, set(wanted))
    parsed: list[tuple[str, Element]] = []
    rejected: list[tuple[str, str]] = []
    for image_id in wanted:
        where = f"Annotations/{image_id}.xml"
        try:
            found = roots.get(image_id)
            parsed.append((image_id, found if isinstance(found, Element) else _annotation(src, where)))
        except ValueError as e:
            rejected.append((where, str(e)))
    ids = {name: k for k, name in enumerate(names)}
    document = SourceDocument(categories=list(enumerate(names)), rejected=rejected)
    for image_id, root in parsed:
        try:
            width, height, objects = _objects(root, ids)
        except ValueError as e:
            document.rejected.append((f"Annotations/{image_id}.xml", str(e)))
            continue
        document.add_image(f"JPEGImages/{image_id}.jpg", width, height, objects)
    return document.index(str(src), "voc", "Annotations")


def _annotation(src: Path, where: str) -> Element:
    try:
        root = parse_xml(read_input(src / where, MAX_LABEL_FILE_BYTES, root=src))
    except FileRefused as e:
        raise ValueError(str(e)) from None
    except OSError as e:
        raise ValueError(f"cannot read: {errno_text(e)}") from None
    if root.tag != "annotation":
        raise ValueError(f"its root element is <{root.tag[:40]}>, not VOC's <annotation>")
    return root


def _folder(src: Path, wanted: set[str]) -> tuple[dict[str, Element | None], list[str]]:
    """Every annotation file of the folder read once: the parsed trees of the ``wanted`` ids (None for one that
    does not parse: its split's reading names why) and the folder's classes, VOC's 20 in VOC's order when every
    file names only those, else every name sorted. Read over the whole folder, not the split, so each split of one
    folder gets the same labels (a split naming only VOC's classes beside one that does not got dog = 11 and 0)."""
    roots: dict[str, Element | None] = {}
    names: set[str] = set()
    for path in sorted((src / "Annotations").glob("*.xml")):
        try:
            root = _annotation(src, f"Annotations/{path.name}")
        except ValueError:
            roots[path.stem] = None  # rejected where its split reads it
            continue
        names |= {(obj.findtext("name") or "") for obj in root.findall("object")}
        if path.stem in wanted:
            roots[path.stem] = root
    if names <= set(VOC_CLASSES):
        return roots, list(VOC_CLASSES)
    return roots, sorted(name for name in names if name and "\n" not in name)


def _number(element: Element, tag: str) -> float:
    text = element.findtext(tag)
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"<{element.tag}><{tag}> is {text!r:.30}, not a number")
    return value


def _objects(root: Element, ids: dict[str, int]) -> tuple[int, int, list[tuple[int, list[float], bool]]]:
    """The image's size and objects (category id, xywh box in COCO's frame, difficult) from its XML."""
    size = root.find("size")
    if size is None:
        raise ValueError("no <size> (width, height) element")
    width, height = _number(size, "width"), _number(size, "height")
    if width != int(width) or height != int(height) or width < 1 or height < 1:
        raise ValueError(f"<size> {width:g}x{height:g} is not two positive integers")
    objects = []
    for k, obj in enumerate(root.findall("object")):
        name, box = obj.findtext("name") or "", obj.find("bndbox")
        if name not in ids:
            raise ValueError(f"object {k}'s <name> {name[:60]!r} is not a class of the folder")
        if box is None:
            raise ValueError(f"object {k} ({name}) has no <bndbox>")
        difficult = (obj.findtext("difficult") or "0").strip()
        if difficult not in ("0", "1"):
            raise ValueError(f"object {k}'s <difficult> {difficult[:20]!r} is not 0 or 1")
        x0, y0, x1, y1 = (_number(box, tag) for tag in ("xmin", "ymin", "xmax", "ymax"))
        objects.append((ids[name], xywh([x0 - 1, y0 - 1, x1, y1]), difficult == "1"))
    return int(width), int(height), objects
