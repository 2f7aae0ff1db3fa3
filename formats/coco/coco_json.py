"""A COCO instances JSON (``images``, ``annotations``, ``categories``) read defensively, every entry checked.

The file is input like any other: a regular file only, read at most ``max_bytes`` (plus
one byte, ``bounded_read``), parsed by ``json.loads`` (nesting past Python's
recursion limit is a one-line error, never a crash), and only the fields COCO
defines are looked at, each for its type. What is wrong with the whole file (no
``images`` list, two categories with one id or name) stops the conversion in
one line; what is wrong with one entry rejects that entry alone, with its reason:

- an image: no integer ``id``, a ``file_name`` that is not a relative path
  inside IMAGES, a size that is not two positive integers, a file given twice
  (the first kept), an id given to two images or more (every one of them
  rejected, and every annotation naming that id: two merged files that both
  number from 1 would otherwise put both images' boxes on the first photo);
- an annotation: an ``image_id`` of no image, a ``category_id`` of no
  category, a ``bbox`` that is not four finite numbers, of zero or negative
  width or height, past the image's edge by more than ``EDGE_SLACK`` pixels
  (COCO's own boxes pass it by rounding), under ``MIN_BOX_SIDE`` (1 px) wide or
  high once clipped to the image, an ``iscrowd`` other than 0 or 1, a
  polygon of fewer than 3 points or of odd length, an RLE whose ``size`` is not
  the image's or whose counts do not cover it;
- an image with more than ``coco_fields.MAX_OBJECTS`` good annotations (the readers refuse such a sample).

Categories are numbered in the order of their ids (their ``label``: 0..K-1), as
detectron2 maps COCO's 80 ids (1..90, with gaps); their names become the
folder's classes and the ids are kept in the manifest to map predictions back.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol
from collections.abc import Iterator

import numpy as np

from dataio.formats.remote.source_files import RemoteRoot, SourceUnreadable
from dataio.formats.bounded_read import FileTooLarge
from dataio.formats.coco.coco_fields import MAX_OBJECTS
from dataio.formats.coco.coco_variants import lvis_file_name, refuse_other_coco_tasks
from dataio.formats.coco.coco_keypoints import KeypointNames, checked_keypoints, keypoint_names
from dataio.formats.errors import DataioError
from dataio.formats.images.image_tree import NotRegularFile, errno_text, read_regular_file
from dataio.formats.limits import MAX_CLASSES, MAX_CLASSES_FILE_BYTES

# a box's least width and height once clipped to its image, in the JSON's pixels: less bounds no object (a box of
# width 1e-7, or one past the edge by under EDGE_SLACK, clipped to nothing) and the loader's min_side (1 px) would
# drop it unseen; mmdetection skips the same boxes (w < 1 or h < 1)
MIN_BOX_SIDE = 1.0
EDGE_SLACK = 1.0  # pixels a box may pass the image's edge by (then clipped); COCO's pass it by rounding
MAX_POLYGON_VALUES = 1 << 20  # coordinates in one annotation's polygons: more is not an outline
# pycocotools rasterises a polygon by walking its outline at 5 steps a pixel, 16 bytes a step, unchecked (a point
# at 4e8 made it segfault, measured with 2.0.11): the outline (L-infinity length, pixels) is bounded first, and
# every point must lie within one image size of the image (the int cast of a far point overflows).
MAX_OUTLINE = 1_000_000  # ~50 MB and 0.3 s in pycocotools; COCO's longest outlines are a few thousand pixels
MAX_ANNOTATIONS_BYTES = 2 << 30  # the JSON read at most (COCO's train2017 instances: 448 MB; LVIS train: 1.1 GB)


@dataclass(frozen=True)
class Annotation:
    """One checked annotation: its id, box (x0, y0, x1, y1 in the JSON's pixels), label, crowd flag and
    segmentation (COCO's polygons or RLE dict, checked for form; None when it has none)."""

    id: int
    box: tuple[float, float, float, float]
    label: int
    iscrowd: bool
    segmentation: Any
    keypoints: tuple[float, ...] | None = None  # 3 x K: x, y, visibility (``coco_keypoints``), in files with names


@dataclass(frozen=True)
class CocoImage:
    """One checked image entry and its checked annotations."""

    id: int
    file_name: str
    width: int
    height: int
    annotations: tuple[Annotation, ...] = ()


class ImageRows(Protocol):
    """Images held elsewhere than as files under IMAGES: their bytes streamed in order, and their sizes."""

    def read(self, images: list[CocoImage]) -> Iterator[Any]:
        """Per image, in order: its bytes, a ``LocalFile`` to read, or a ``Rejection`` saying why there are none."""

    def sizes(self, images: list[CocoImage]) -> np.ndarray:
        """``(len(images),)`` int64 bytes each, to split the images between ranks by bytes."""


@dataclass
class CocoIndex:
    """What a COCO JSON holds, checked: categories (id, name, supercategory) in label order, images, and each
    rejected entry as (where, reason)."""

    categories: list[tuple[int, str, str]]
    images: list[CocoImage]
    rejected: list[tuple[str, str]] = field(default_factory=list)
    has_segmentation: bool = False
    ambiguous: dict[int, int] = field(default_factory=dict)  # image ids given to more than one image -> how many
    # what a source layer read it from, for the manifest's options (source, annotations, annotations_sha256);
    # None: the COCO JSON of the conversion's config
    origin: dict[str, str] | None = None
    keypoints: KeypointNames | None = None  # the categories' keypoint names and skeleton (person_keypoints files)
    # where the images' bytes are when they are no files under the config's images folder (a Hub Parquet's
    # rows): ``hub_detection_source.ParquetRows``; None: the files under IMAGES named by file_name
    image_rows: ImageRows | None = None

    @property
    def classes(self) -> tuple[str, ...]:
        return tuple(name for _, name, _ in self.categories)


def read_coco_json(path: Path | RemoteRoot, max_bytes: int = MAX_ANNOTATIONS_BYTES) -> CocoIndex:
    """The checked index of the COCO JSON at ``path``; DataioError naming the file for what stops it whole."""
    where = str(path)
    try:  # a regular file only: a FIFO without a writer blocked the conversion for ever, /dev/zero read 2 GiB
        data = (path.read("", max_bytes) if isinstance(path, RemoteRoot) else  # a URL: through the storage layer
                read_regular_file(path, max_bytes))  # (and the conversion's fingerprint reads the file again)
    except FileTooLarge as e:
        raise DataioError(f"{where}: {e} (raise --max-annotations-size)") from None
    except NotRegularFile as e:
        raise DataioError(f"{where}: {e} (the annotations must be a file)") from None
    except OSError as e:
        raise DataioError(f"{where}: cannot read: {errno_text(e)}") from None
    except SourceUnreadable as e:  # a remote file's storage failed (a 403, a reset past the retries)
        raise DataioError(str(e)) from None
    try:
        document = json.loads(data)
    except RecursionError:
        raise DataioError(f"{where}: not COCO JSON (nested too deeply)") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise DataioError(f"{where}: not valid JSON ({e})") from None
    del data
    return coco_index(document, where, path.name)


def coco_index(document: Any, where: str, name: str) -> CocoIndex:
    """The checked index of a parsed COCO document (``where`` names it in errors, ``name`` in rejections): the
    JSON file's, or one a source layer built from another layout (``formats/coco/*_source.py``)."""
    if not isinstance(document, dict):
        raise DataioError(f"{where}: not COCO JSON (the top level is not an object)")
    for listed in ("images", "categories"):
        if not isinstance(document.get(listed), list):
            raise DataioError(f"{where}: not COCO instances JSON (no {listed!r} list)")
    refuse_other_coco_tasks(document, where)
    annotations = document.get("annotations", [])
    if not isinstance(annotations, list):
        raise DataioError(f"{where}: 'annotations' is not a list")
    categories = _categories(document["categories"], where)
    index = CocoIndex(categories=categories, images=[],
                      keypoints=keypoint_names(document["categories"], annotations, where))
    images = _images(document["images"], name, index)
    grouped = _annotations(annotations, name, {cid: label for label, (cid, _, _) in enumerate(categories)},
                           images, index)
    for image_id, found in grouped.items():
        if len(found) > MAX_OBJECTS:  # the readers would refuse the sample: refused here, with the count
            index.rejected.append((f"{name}#image {image_id}", f"{len(found):,} good annotations, more than "
                                   f"the {MAX_OBJECTS:,} a sample may hold"))
            del images[image_id]
    index.images = [CocoImage(image.id, image.file_name, image.width, image.height, tuple(grouped[image.id]))
                    for image in images.values()]
    return index


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _categories(raw: list, where: str) -> list[tuple[int, str, str]]:
    """(id, name, supercategory) sorted by id; a bad or repeated one stops the conversion (labels depend on all)."""
    found: dict[int, tuple[str, str]] = {}
    names: dict[str, int] = {}
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict) or not _integer(entry.get("id")) or not isinstance(entry.get("name"), str):
            raise DataioError(f"{where}: categories[{i}] is not an object with an integer id and a name")
        cid, name = entry["id"], entry["name"]
        if cid in found:
            raise DataioError(f"{where}: category id {cid} is given twice")
        if name in names or not name or "\n" in name:
            raise DataioError(f"{where}: category {cid}'s name {name[:64]!r} is "
                              + (f"category {names[name]}'s too" if name in names else "not one line of text"))
        supercategory = entry.get("supercategory")
        found[cid], names[name] = (name, supercategory if isinstance(supercategory, str) else ""), cid
    if not found:
        raise DataioError(f"{where}: lists no categories")
    if len(found) > MAX_CLASSES:
        raise DataioError(f"{where}: lists {len(found):,} categories, more than {MAX_CLASSES:,}")
    size = sum(len(json.dumps(text)) for pair in found.values() for text in pair)  # as the manifest writes them
    if size > MAX_CLASSES_FILE_BYTES:  # the manifest holds them twice; past its limit no reader opens the folder
        raise DataioError(f"{where}: the categories' names take {size:,} bytes, more than the "
                          f"{MAX_CLASSES_FILE_BYTES:,} of a classes file")
    return [(cid, *found[cid]) for cid in sorted(found)]


def _images(raw: list, name: str, index: CocoIndex) -> dict[int, CocoImage]:
    """The good image entries by id, in file order; the others rejected with their reason."""
    images: dict[int, CocoImage] = {}
    files: dict[str, int] = {}
    given = Counter(entry["id"] for entry in raw if isinstance(entry, dict) and _integer(entry.get("id")))
    index.ambiguous = {image_id: count for image_id, count in given.items() if count > 1}
    for i, entry in enumerate(raw):
        at = f"{name}#images[{i}]"
        if not isinstance(entry, dict) or not _integer(entry.get("id")):
            index.rejected.append((at, "not an object with an integer id"))
            continue
        if not -(1 << 63) <= entry["id"] < 1 << 63:  # stored in the table's int64 image_id column
            index.rejected.append((at, f"its id {str(entry['id'])[:40]} does not fit in 64 bits"))
            continue
        image_id, file_name = entry["id"], entry.get("file_name", lvis_file_name(entry))
        at = f"{name}#image {image_id}"
        width, height = entry.get("width"), entry.get("height")
        reason = None
        if not isinstance(file_name, str):
            reason = "no file_name"
        elif not (_integer(width) and _integer(height) and width > 0 and height > 0):
            reason = f"width and height must be positive integers, got {width!r:.20} and {height!r:.20}"
        elif image_id in index.ambiguous:  # two merged files both numbering from 1: whose boxes are whose is unknown
            reason = (f"its id is given to {index.ambiguous[image_id]} images (file_name {file_name[:200]!r}): none "
                      "of them is packed, nor any annotation naming the id")
        elif file_name in files:
            reason = f"its file {file_name[:200]!r} is image {files[file_name]}'s too"
        else:
            reason = path_problem(file_name)
        if reason:
            index.rejected.append((at, reason))
            continue
        images[image_id] = CocoImage(image_id, file_name, width, height)
        files[file_name] = image_id
    return images


def path_problem(file_name: str) -> str | None:
    """Why ``file_name`` is not a relative path inside IMAGES, or None."""
    parts = file_name.split("/")
    if not file_name or file_name.startswith("/") or "\x00" in file_name or ".." in parts or "" in parts:
        return f"file_name {file_name[:200]!r} is not a relative path inside the images folder"
    if "\\" in file_name:
        return f"file_name {file_name[:200]!r} holds a backslash (write folders with '/')"
    return None


def _annotations(raw: list, name: str, labels: dict[int, int], images: dict[int, CocoImage],
                 index: CocoIndex) -> dict[int, list[Annotation]]:
    """Each image's good annotations, in file order; the others rejected with their reason."""
    grouped: dict[int, list[Annotation]] = {image_id: [] for image_id in images}
    # an id given to two annotations: pycocotools (and any evaluation keyed by id) keeps one, so the packed boxes
    # and the file's own evaluation would disagree; every annotation naming it is refused, as ambiguous image ids
    given = Counter(e.get("id") for e in raw if isinstance(e, dict) and _integer(e.get("id")))
    for i, entry in enumerate(raw):
        ann_id = entry.get("id") if isinstance(entry, dict) else None
        at = f"{name}#annotation {ann_id}" if _integer(ann_id) else f"{name}#annotations[{i}]"
        if not isinstance(entry, dict):
            index.rejected.append((at, "not an object"))
            continue
        if _integer(ann_id) and given[ann_id] > 1:
            index.rejected.append((at, f"annotation id {ann_id} is given to {given[ann_id]} annotations (an "
                                       "evaluation keyed by id keeps one of them)"))
            continue
        image = images.get(entry.get("image_id")) if _integer(entry.get("image_id")) else None
        if image is None and entry.get("image_id") in index.ambiguous and _integer(entry.get("image_id")):
            index.rejected.append((at, f"image_id {entry['image_id']} is given to {index.ambiguous[entry['image_id']]}"
                                       " images (which one it belongs to is unknown)"))
            continue
        if image is None:
            index.rejected.append((at, f"image_id {entry.get('image_id')!r:.20} is not an image of the file "
                                       "(or that image was rejected)"))
            continue
        try:
            annotation = _annotation(entry, ann_id if _integer(ann_id) else -1, labels, image)
            if index.keypoints is not None:
                annotation = replace(annotation, keypoints=checked_keypoints(
                    entry, len(index.keypoints.names), image.width, image.height))
        except ValueError as e:
            index.rejected.append((at, f"{e} (image {image.file_name[:200]!r})"))
            continue
        index.has_segmentation |= annotation.segmentation is not None
        grouped[image.id].append(annotation)
    return grouped


def _annotation(entry: dict, ann_id: int, labels: dict[int, int], image: CocoImage) -> Annotation:
    """One annotation checked against its image; ValueError with the reason."""
    category = entry.get("category_id")
    if not _integer(category) or category not in labels:
        raise ValueError(f"category_id {category!r:.20} is not a category of the file")
    box = entry.get("bbox")
    if not (isinstance(box, list) and len(box) == 4 and all(_number(v) for v in box)):
        raise ValueError(f"bbox {box!r:.60} is not four finite numbers")
    x, y, w, h = (float(v) for v in box)
    if w <= 0 or h <= 0:
        raise ValueError(f"bbox {box!r:.60} has a negative or zero size")
    if x < -EDGE_SLACK or y < -EDGE_SLACK or x + w > image.width + EDGE_SLACK or y + h > image.height + EDGE_SLACK:
        raise ValueError(f"bbox {box!r:.60} lies outside the {image.width}x{image.height} image")
    crowd = entry.get("iscrowd", 0)
    if crowd not in (0, 1) or isinstance(crowd, float):
        raise ValueError(f"iscrowd {crowd!r:.20} is not 0 or 1")
    right, bottom = float(image.width), float(image.height)
    box_xyxy = (min(max(x, 0.0), right), min(max(y, 0.0), bottom), min(x + w, right), min(y + h, bottom))
    sides = (max(0.0, box_xyxy[2] - box_xyxy[0]), max(0.0, box_xyxy[3] - box_xyxy[1]))
    if min(sides) < MIN_BOX_SIDE:
        raise ValueError(f"bbox {box!r:.60} is {sides[0]:.3g} x {sides[1]:.3g} px once clipped to the "
                         f"{image.width}x{image.height} image, under the {MIN_BOX_SIDE:g} px a box must span each way")
    return Annotation(ann_id, box_xyxy, labels[category], bool(crowd),
                      _segmentation(entry.get("segmentation"), image))


def _check_outlines(polygons: list[list[float]], image: CocoImage) -> None:
    """ValueError unless every point lies within one image size of the image and the outlines' total length
    is at most ``MAX_OUTLINE`` pixels (what rasterising them costs: see ``MAX_OUTLINE``). Builtins over the
    lists, numpy only for a polygon long enough to pass the limit: ~1 us a common polygon (COCO: 1.2 million)."""
    width, height = image.width, image.height
    bound = 0  # each edge's L-infinity length is at most 3 image sizes, points being within one of the image
    for k, polygon in enumerate(polygons):
        xs, ys = polygon[0::2], polygon[1::2]
        if min(xs) < -width or max(xs) > 2 * width or min(ys) < -height or max(ys) > 2 * height:
            raise ValueError(f"polygon {k} has a point far outside the {width}x{height} image")
        bound += len(xs) * 3 * max(width, height)
    if bound <= MAX_OUTLINE:
        return
    outline = 0.0
    for polygon in polygons:
        points = np.asarray(polygon, np.float64).reshape(-1, 2)
        outline += float(np.abs(np.diff(points, axis=0, append=points[:1])).max(axis=1).sum())
    if outline > MAX_OUTLINE:
        raise ValueError(f"its polygons' outline is {outline:,.0f} pixels long (more than {MAX_OUTLINE:,})")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _segmentation(segmentation: Any, image: CocoImage) -> Any:
    """The segmentation checked for form (None for none); ValueError with the reason."""
    if segmentation is None or segmentation == []:
        return None
    if isinstance(segmentation, list):
        total = 0
        for k, polygon in enumerate(segmentation):
            if not isinstance(polygon, list) or not all(_number(v) for v in polygon):
                raise ValueError(f"polygon {k} is not a list of finite numbers")
            if len(polygon) % 2 or len(polygon) < 6:
                raise ValueError(f"polygon {k} has {len(polygon) / 2:g} points (fewer than 3, or an odd count "
                                 "of coordinates)")
            total += len(polygon)
        if total > MAX_POLYGON_VALUES:
            raise ValueError(f"its polygons hold {total:,} coordinates (more than {MAX_POLYGON_VALUES:,})")
        _check_outlines(segmentation, image)
        return [[float(v) for v in polygon] for polygon in segmentation]
    if isinstance(segmentation, dict):
        size, counts = segmentation.get("size"), segmentation.get("counts")
        if size != [image.height, image.width]:
            raise ValueError(f"RLE size {size!r:.30} is not the image's [{image.height}, {image.width}]")
        if isinstance(counts, list):
            if not all(_integer(c) and c >= 0 for c in counts) or sum(counts) != image.width * image.height:
                raise ValueError(f"RLE counts do not cover the {image.width}x{image.height} image")
            return {"size": size, "counts": counts}
        if isinstance(counts, str) and counts.isascii() and len(counts) <= 8 * (image.width * image.height + 1):
            return {"size": size, "counts": counts}
        raise ValueError("RLE counts are neither a list of run lengths nor a COCO RLE string")
    raise ValueError(f"segmentation is neither polygons nor an RLE object (a {type(segmentation).__name__})")
