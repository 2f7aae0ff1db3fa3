"""One COCO image prepared for packing, its boxes and masks moved with its pixels (in a converter's worker).

The image goes through ``image_prepare`` as any packed image does, which may
turn it upright (an EXIF orientation) and downscale it (``--max-side``). The
annotations are in the pixels of the file as COCO's tools read it (PIL without
the EXIF turn, as pycocotools and torchvision's ``CocoDetection`` do), unless
the JSON's width and height are those of the turned image only: then they are
already upright. Boxes are mapped by the same turn and scale (their corners,
then the envelope: exact for these axis-aligned maps) into the packed image's
pixels, xyxy; masks are rasterised at the JSON's size by pycocotools (polygons,
RLE), turned with PIL's own ``transpose`` and scaled nearest-neighbour
(``Image.resize`` samples pixel centres, the frame boxes use), then stored as
COCO's compressed RLE string, a few hundred bytes an object.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from dataio.formats.coco.coco_fields import MIN_STORED_SIDE
from dataio.formats.coco.coco_json import Annotation
from dataio.formats.coco.coco_rle import decode_rle
from dataio.formats.images.image_prepare import EXIF_ORIENTATION, ImagePrepareConfig, PreparedImage, Rejection, prepare_image

WITHOUT_PYCOCOTOOLS = ("COCO segmentations need pycocotools, which is not installed: "
                       "pip install 'torch-dataio[coco]' (or pycocotools)")
# EXIF orientation -> PIL's transpose that turns the file upright (ImageOps.exif_transpose's table)
TURNS = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
         5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
         8: Image.Transpose.ROTATE_90}
MIRRORS = (Image.Transpose.FLIP_LEFT_RIGHT, Image.Transpose.FLIP_TOP_BOTTOM, Image.Transpose.TRANSPOSE,
           Image.Transpose.TRANSVERSE)  # the turns that mirror (determinant -1)


@dataclass(frozen=True)
class PreparedTargets:
    """An image ready to pack and its objects in its pixels: xyxy boxes, labels, crowd flags, RLE strings
    ('' for an object without a segmentation); the annotations rejected here, as (id, reason)."""

    image: PreparedImage
    boxes: list[list[float]]
    labels: list[int]
    iscrowd: list[bool]
    masks: list[str]
    rejected: list[tuple[int, str]] = field(default_factory=list)
    keypoints: list[list[float]] = field(default_factory=list)  # 3 x K an object, with keypoint names only


def pycocotools_mask() -> Any:
    """``pycocotools.mask``, or ImportError in one line."""
    try:
        from pycocotools import mask  # lazy: optional (the ``coco`` extra), needed for segmentations only
    except ImportError:
        raise ImportError(WITHOUT_PYCOCOTOOLS) from None
    return mask


def prepare_coco_image(data: bytes, width: int, height: int, annotations: tuple[Annotation, ...],
                       prepare: ImagePrepareConfig, masks: bool,
                       flips: np.ndarray | None = None) -> PreparedTargets | Rejection:
    """``data`` (the file of a ``width`` x ``height`` JSON entry) prepared, with its annotations moved along (their
    keypoints too, reordered by ``flips``, ``coco_keypoints.flip_indices``, where the EXIF turn mirrors)."""
    try:
        with Image.open(io.BytesIO(data)) as header:  # the header only: the size and orientation as stored
            raw = header.size
            orientation = header.getexif().get(EXIF_ORIENTATION, 1)
    except Exception:  # noqa: BLE001 - whatever PIL says, prepare_image names it below
        raw, orientation = (width, height), 1
    turn = TURNS.get(orientation) if raw == (width, height) else None
    turned = raw[::-1] if orientation in (5, 6, 7, 8) else raw
    if raw != (width, height) and turned != (width, height):
        return Rejection(f"the annotations are for a {width}x{height} image, the file is {raw[0]}x{raw[1]}")
    prepared = prepare_image(data, prepare)
    if isinstance(prepared, Rejection):
        return prepared
    upright = turned if turn is not None else (width, height)
    scale = (prepared.width / upright[0], prepared.height / upright[1])
    out = PreparedTargets(prepared, [], [], [], [])
    coco_mask = pycocotools_mask() if masks else None
    for annotation in annotations:
        rle = ""
        if coco_mask is not None and annotation.segmentation is not None:
            try:
                rle = _stored_rle(coco_mask, annotation.segmentation, (width, height), turn, prepared)
            except ValueError as e:
                out.rejected.append((annotation.id, str(e)))
                continue
        box = _moved_box(annotation.box, (width, height), turn, scale, prepared)
        stored = np.asarray(box, np.float32).astype(np.float64)  # as the table keeps it
        if min(stored[2] - stored[0], stored[3] - stored[1]) < MIN_STORED_SIDE:  # --max-side thinned it to nothing
            out.rejected.append((annotation.id, f"its box is {stored[2] - stored[0]:.3g} x {stored[3] - stored[1]:.3g}"
                                                f" px once the image is scaled to {prepared.width}x{prepared.height}"
                                                f", under the {MIN_STORED_SIDE:g} px a stored box must span"))
            continue
        out.boxes.append(box)
        out.labels.append(annotation.label)
        out.iscrowd.append(annotation.iscrowd)
        out.masks.append(rle)
        if flips is not None and annotation.keypoints is not None:
            out.keypoints.append(_moved_keypoints(annotation.keypoints, (width, height), turn, scale, flips))
    return out


def _moved_keypoints(values: tuple[float, ...], size: tuple[int, int], turn: Image.Transpose | None,
                     scale: tuple[float, float], flips: np.ndarray) -> list[float]:
    """3 x K keypoint values (the JSON's pixels) in the prepared image's pixels; unlabelled ones stay 0, 0, 0."""
    points = np.asarray(values, np.float64).reshape(-1, 3)
    labelled = points[:, 2] > 0
    xy = points[:, :2]
    if turn is not None:
        xy = turn_points(xy, size, turn)
        if turn in MIRRORS:  # the person's left point is on the right now: swapped, as a flip swaps them
            xy, points, labelled = xy[flips], points[flips], labelled[flips]
    moved = np.concatenate([xy * np.array(scale), points[:, 2:]], axis=1)
    return np.where(labelled[:, None], moved, 0.0).reshape(-1).tolist()


def _moved_box(box: tuple[float, ...], size: tuple[int, int], turn: Image.Transpose | None,
               scale: tuple[float, float], prepared: PreparedImage) -> list[float]:
    """``box`` (xyxy in the JSON's pixels) in the prepared image's pixels, clipped to it."""
    x0, y0, x1, y1 = box
    corners = np.array([[x0, y0], [x1, y1]])
    if turn is not None:
        corners = turn_points(corners, size, turn)
    corners = corners * np.array(scale)
    low, high = corners.min(axis=0), corners.max(axis=0)
    limit = np.array([prepared.width, prepared.height], dtype=np.float64)
    low, high = np.clip(low, 0, limit), np.clip(high, 0, limit)
    return [float(v) for v in (*low, *high)]


def turn_points(points: np.ndarray, size: tuple[int, int], turn: Image.Transpose) -> np.ndarray:
    """(K, 2) points (continuous pixels of a ``size`` image) where ``transpose(turn)`` puts them."""
    w, h = size
    x, y = points[:, 0], points[:, 1]
    moved = {Image.Transpose.FLIP_LEFT_RIGHT: (w - x, y), Image.Transpose.FLIP_TOP_BOTTOM: (x, h - y),
             Image.Transpose.ROTATE_180: (w - x, h - y), Image.Transpose.ROTATE_90: (y, w - x),
             Image.Transpose.ROTATE_270: (h - y, x), Image.Transpose.TRANSPOSE: (y, x),
             Image.Transpose.TRANSVERSE: (h - y, w - x)}[turn]
    return np.stack(moved, axis=1)


def _stored_rle(coco_mask: Any, segmentation: Any, size: tuple[int, int], turn: Image.Transpose | None,
                prepared: PreparedImage) -> str:
    """The segmentation as COCO's compressed RLE string in the prepared image's pixels; ValueError if its RLE
    does not cover the image exactly."""
    width, height = size
    if isinstance(segmentation, list):
        counts = coco_mask.merge(coco_mask.frPyObjects(segmentation, height, width))["counts"]
    elif isinstance(segmentation["counts"], list):
        counts = coco_mask.frPyObjects(segmentation, height, width)["counts"]
    else:
        counts = segmentation["counts"].encode("ascii")
    try:
        mask = decode_rle(counts, height, width)  # checked: pycocotools decodes short runs into garbage
    except ValueError as e:
        raise ValueError(f"its RLE is not a mask of the {width}x{height} image ({e})") from None
    if turn is None and (prepared.width, prepared.height) == (width, height):
        return counts.decode("ascii")
    image = Image.fromarray(mask * 255)
    if turn is not None:
        image = image.transpose(turn)
    if image.size != (prepared.width, prepared.height):
        image = image.resize((prepared.width, prepared.height), Image.Resampling.NEAREST)
    moved = np.asfortranarray((np.asarray(image) > 127).astype(np.uint8))
    return coco_mask.encode(moved)["counts"].decode("ascii")
