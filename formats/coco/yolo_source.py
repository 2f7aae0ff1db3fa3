"""``dataio convert yolo SRC OUT``: a YOLO detection folder read into COCO's index, packed as ``convert coco`` packs.

The layout is Ultralytics' (and darknet's): ``SRC/images/[SPLIT/]NAME.jpg`` with ``SRC/labels/[SPLIT/]NAME.txt``,
one object a line, ``class cx cy w h``, the centre and size normalised to the image (0..1). An image without a
label file has no objects (a background image, as Ultralytics reads it). The class names are ``data.yaml``'s
``names`` (a list, or a dict from class to name; read by PyYAML's ``safe_load``), else ``classes.txt``'s lines,
else the class numbers up to the largest used; category id = class number. A label file Ultralytics would refuse
(a line of other than 5 values, a class that is not a listed integer, a coordinate outside 0..1, a size of 0)
rejects its image with the file, line and reason; a box whose centre and size pass the image's edge is clipped
there, as Ultralytics clips it. Two or more subfolders of images/ holding images are splits (``train2017``,
``val2017`` as much as ``train``, ``val``): without ``--split`` the folder is refused in one line. Labels are for the image as viewers show it (Ultralytics sizes
the image after its EXIF turn): boxes are mapped into the stored pixels, which the packer turns with the image.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from dataio.formats.coco.coco_convert import CocoSummary, ConvertCocoConfig, convert_coco
from dataio.formats.coco.coco_json import CocoIndex
from dataio.formats.coco.detection_source import (MAX_LABEL_FILE_BYTES, SourceDocument, image_files, stored_frame,
                                                  upright_size, xywh)
from dataio.formats.errors import DataioError, UsageError
from dataio.formats.file_gate import FileRefused, read_input
from dataio.formats.images.image_names import IMAGE_EXTENSIONS
from dataio.formats.images.image_tree import errno_text

SPLIT_NAMES = ("train", "val", "valid", "test")  # Ultralytics' split folders (a split even while empty)


@dataclass(frozen=True, kw_only=True)
class ConvertYoloConfig(ConvertCocoConfig):
    """``ConvertCocoConfig`` with ``images`` the YOLO folder (holding images/ and labels/), ``annotations`` its
    labels/ folder, and the split: the subfolder of images/ and labels/ to pack (None: all of images/)."""

    split: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.split is not None and (not self.split or "/" in self.split or self.split in (".", "..")):
            raise ValueError(f"split must be a folder name of images/, got {self.split!r}")


def yolo_config(src: Path, out: Path, split: str | None = None, **options) -> ConvertYoloConfig:
    """The config that packs the YOLO folder ``src`` (``options``: ``ConvertCocoConfig``'s packing keywords)."""
    return ConvertYoloConfig(images=src, annotations=Path(src) / "labels", out=out, split=split, **options)


def convert_yolo(config: ConvertYoloConfig) -> CocoSummary:
    """Pack the YOLO folder ``config.images`` into ``config.out`` (``convert_coco``'s engine and output)."""
    return convert_coco(config, read_yolo(config.images, config.split))


def read_yolo(src: Path, split: str | None) -> CocoIndex:
    """The checked COCO index of the YOLO folder ``src`` (its ``split`` subfolder, when given)."""
    images_root, labels_root = src / "images", src / "labels"
    if not images_root.is_dir() or not labels_root.is_dir():
        raise UsageError(f"{src}: not a YOLO folder (it needs images/ and labels/ folders)")
    if split is None:
        splits = split_folders(images_root)
        if len(splits) > 1:
            raise UsageError(f"{src}: images/ holds the splits {', '.join(splits)}: give the one to pack (--split)")
    elif not (images_root / split).is_dir():
        raise UsageError(f"{src}: no images/{split} folder for --split {split}")
    within = "" if split is None else f"{split}/"
    names = class_names(src)
    found: list[tuple[str, int, int, int, list[tuple[int, list[float]]]]] = []
    rejected: list[tuple[str, str]] = []
    for relative in image_files(images_root / within if within else images_root):
        image, label = f"images/{within}{relative}", f"labels/{within}{os.path.splitext(relative)[0]}.txt"
        try:
            width, height, orientation = upright_size(src / image, src)
            objects = _label_file(src, label, names)
        except _Rejected as e:
            rejected.append(e.args)
            continue
        except OSError as e:
            rejected.append((image, str(e)))
            continue
        found.append((image, width, height, orientation, objects))
    used = max((c for *_, objects in found for c, _ in objects), default=-1)
    categories = names if names is not None else [str(k) for k in range(used + 1)]
    document = SourceDocument(categories=list(enumerate(categories or ["0"])), rejected=rejected)
    for image, width, height, orientation, objects in found:
        raw = (height, width) if orientation in (5, 6, 7, 8) else (width, height)
        document.add_image(image, width, height, [
            (c, xywh(stored_frame(box, *raw, orientation) if orientation in (2, 3, 4) else box), False)
            for c, box in ((c, _pixels(box, width, height)) for c, box in objects)])
    return document.index(str(src), "yolo", "labels")


def split_folders(images_root: Path) -> list[str]:
    """The subfolders of images/ named as Ultralytics' splits or holding images: two or more are splits
    (``train2017`` and ``val2017`` as much as ``train`` and ``val``), which packed together would mix validation
    into training."""
    found = []
    for entry in sorted(os.scandir(images_root), key=lambda e: e.name):
        if entry.is_dir(follow_symlinks=False) and (entry.name in SPLIT_NAMES or _holds_images(Path(entry.path))):
            found.append(entry.name)
    return found


def _holds_images(folder: Path) -> bool:
    """Whether any file under ``folder`` is an image (stops at the first)."""
    for _, _, files in os.walk(folder):
        if any(name.lower().endswith(IMAGE_EXTENSIONS) for name in files):
            return True
    return False


class _Rejected(Exception):
    """An image rejected for its label file: (where, reason)."""


def _pixels(box: tuple[float, float, float, float], width: int, height: int) -> list[float]:
    """A normalised YOLO (cx, cy, w, h) box in the image's pixels, xyxy."""
    cx, cy, w, h = box
    x0, y0, x1, y1 = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2
    # clipped to the image as Ultralytics' training pipeline does (Instances.clip in RandomPerspective): its label
    # check takes any line whose values lie in 0..1, so a box whose centre and size pass the edge is kept, cut
    x0, x1 = (min(max(v, 0.0), 1.0) * width for v in (x0, x1))
    y0, y1 = (min(max(v, 0.0), 1.0) * height for v in (y0, y1))
    return [x0, y0, x1, y1]


def _label_file(src: Path, label: str, names: list[str] | None) -> list[tuple[int, tuple[float, ...]]]:
    """The objects of one label file ([] when there is none: a background image); ``_Rejected`` for a bad one."""
    try:
        data = read_input(src / label, MAX_LABEL_FILE_BYTES, root=src)
    except FileNotFoundError:
        return []
    except FileRefused as e:
        raise _Rejected(label, str(e)) from None
    except OSError as e:
        raise _Rejected(label, f"cannot read: {errno_text(e)}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Rejected(label, "not UTF-8 text") from None
    objects = []
    for number, line in enumerate(text.splitlines(), 1):
        values = line.split()
        if not values:
            continue
        problem = _line_problem(values, names)
        if problem:
            raise _Rejected(f"{label}:{number}", problem)
        objects.append((int(values[0]), tuple(float(v) for v in values[1:])))
    return objects


def _line_problem(values: list[str], names: list[str] | None) -> str | None:
    """Why one label line is not ``class cx cy w h`` with normalised coordinates, or None."""
    shown = " ".join(values)[:80]
    if len(values) != 5:
        return (f"{len(values)} values in {shown!r}, not the 5 of 'class cx cy w h' (a segmentation or keypoints "
                "label is not a box label)")
    if not (values[0].isascii() and values[0].isdigit()) or len(values[0]) > 9:  # '²' is a digit int() refuses
        return f"class {values[0][:20]!r} is not a non-negative integer"
    if names is not None and int(values[0]) >= len(names):
        return f"class {int(values[0])} is not one of the {len(names)} names of the folder's class list"
    try:
        cx, cy, w, h = (float(v) for v in values[1:])
    except ValueError:
        return f"{shown!r} holds a coordinate that is not a number"
    if not all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in (cx, cy, w, h)):
        return f"{shown!r} holds a coordinate outside 0..1 (YOLO's are normalised to the image)"
    if w <= 0 or h <= 0:
        return f"{shown!r} has a zero width or height"
    return None


def class_names(src: Path) -> list[str] | None:
    """The class names of ``data.yaml`` (``names``) or ``classes.txt`` in ``src``; None when neither is there."""
    yaml_path, text_path = src / "data.yaml", src / "classes.txt"
    if yaml_path.is_file():
        names = _yaml_names(yaml_path)
    elif text_path.is_file():
        names = [line.strip() for line in _text(text_path).splitlines() if line.strip()]
    else:
        return None
    if not names or len(set(names)) != len(names) or any("\n" in n for n in names):
        raise DataioError(f"{yaml_path if yaml_path.is_file() else text_path}: its class names are empty or repeated")
    return names


def _text(path: Path) -> str:
    try:
        return read_input(path, MAX_LABEL_FILE_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        raise DataioError(f"{path}: not UTF-8 text") from None
    except OSError as e:
        raise DataioError(f"{path}: cannot read: {errno_text(e)}") from None


def _yaml_names(path: Path) -> list[str]:
    """``names`` of an Ultralytics data.yaml: a list, or a dict {class number: name} numbered from 0."""
    try:
        import yaml  # lazy: PyYAML is needed only for a data.yaml, and safe_load builds no Python objects
    except ImportError:
        raise UsageError(f"{path}: reading it needs PyYAML (pip install pyyaml), or give the names in "
                         "classes.txt, one a line") from None
    try:
        document = yaml.safe_load(_text(path))
    except yaml.YAMLError as e:
        raise DataioError(f"{path}: not YAML ({(str(e).splitlines() or [''])[0]})") from None
    except RecursionError:  # PyYAML composes nested collections recursively: a few KB of brackets exhaust it
        raise DataioError(f"{path}: its YAML nests too deep to read (a data.yaml is a flat list of names)") from None
    names = document.get("names") if isinstance(document, dict) else None
    if isinstance(names, dict) and all(type(k) is int for k in names) and sorted(names) == list(range(len(names))):
        names = [names[k] for k in range(len(names))]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise DataioError(f"{path}: no 'names' list of strings (or dict numbered 0..K-1)")
    return names
