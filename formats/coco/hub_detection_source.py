"""``dataio convert hub-detection SRC OUT``: Hugging Face detection Parquet read into COCO's index, packed as
``convert coco`` packs.

The layout is the Hub's for detection (``cppe-5``, ``detection-datasets/coco``, ``keremberke/*``): an ``image``
column (HF's ``Image`` struct of ``bytes`` and ``path``), an ``objects`` column holding each row's objects either
as a struct of lists (``bbox``, ``category``, optionally ``iscrowd``, ``area``, ``id``) or as a list of structs,
and optionally ``image_id``, ``width`` and ``height`` (ids that repeat across rows: every image numbered by its
row instead, said once, as each row holds its own objects). Boxes are in ``bbox_format``: ``coco`` (x, y, w, h in
pixels, cppe-5's), ``xyxy`` (pixels) or ``yolo`` (normalised cx, cy, w, h); they are turned into COCO's xywh
and checked as a COCO box is. Category names come from ``--classes FILE``, else the ``ClassLabel`` of ``category``
in the schema's ``huggingface`` metadata (JSON, read with ``json``: nothing is unpickled), else the numbers up to
the largest used. Without ``width``/``height`` columns each image's size is read from its header, which
streams the image column once more.

Only the objects and size columns are read to build the index (no image bytes, unless sizes are missing); the
packer then streams the image bytes in row order through ``parquet_images`` (one bounded record batch at a
time, a damaged row group costing only its rows), so memory stays bounded and a resumed run restarts the
stream at its first unpacked row, to the same bytes. A row whose objects are malformed (a bbox that is not 4
finite numbers, a category outside the names, lists of unequal length) is rejected in one line naming the row.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from PIL import Image

from dataio.formats.coco.coco_convert import CocoSummary, ConvertCocoConfig, convert_coco
from dataio.formats.coco.coco_json import CocoImage, CocoIndex
from dataio.formats.coco.detection_source import HEADER_BYTES, SourceDocument, xywh
from dataio.formats.errors import UsageError
from dataio.formats.fallback_log import warn_once
from dataio.formats.file_gate import open_input, open_parquet
from dataio.formats.images.class_names import read_class_names
from dataio.formats.images.image_prepare import Rejection
from dataio.formats.images.parquet_images import (DAMAGED_PARQUET, ParquetImages, _common_root, _features,
                                                  check_image_column, parquet_files, plain)
from dataio.formats.limits import MAX_CLASSES

BBOX_FORMATS = ("coco", "xyxy", "yolo")
SIZE_COLUMNS = ("image_id", "width", "height")  # read with the objects when the file has them


@dataclass(frozen=True, kw_only=True)
class ConvertHubDetectionConfig(ConvertCocoConfig):
    """``ConvertCocoConfig`` with ``images`` the Parquet source (a file, a glob or a folder of them; ``annotations``
    the same), its columns, the boxes' convention and an optional class names file."""

    bbox_format: str = "coco"
    classes_file: Path | None = None
    image_column: str = "image"
    objects_column: str = "objects"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.bbox_format not in BBOX_FORMATS:
            raise ValueError(f"bbox_format must be one of {', '.join(BBOX_FORMATS)}, got {self.bbox_format!r:.40}")
        if not self.image_column or not self.objects_column:
            raise ValueError("image_column and objects_column must be column names")


def hub_detection_config(src: Path, out: Path, **options) -> ConvertHubDetectionConfig:
    """The config that packs the Parquet source ``src`` (``options``: the config's other keywords)."""
    return ConvertHubDetectionConfig(images=src, annotations=src, out=out, **options)


def convert_hub_detection(config: ConvertHubDetectionConfig) -> CocoSummary:
    """Pack the Hub detection Parquet ``config.images`` into ``config.out`` (``convert_coco``'s engine and output)."""
    files = parquet_files(Path(config.images))
    if files is None:
        raise UsageError(f"{config.images}: no .parquet files (give a .parquet file, a glob or a folder of them)")
    return convert_coco(config, read_hub_detection(files, config))


@dataclass
class _Row:
    """One good row before its image's size is known: (row id, position in the source, image id, size, objects)."""

    id: str
    position: int
    image_id: int | None
    size: tuple[int, int] | None
    objects: list[tuple[int, list[float], bool]]


class ParquetRows:
    """The packed images' bytes, streamed from the Parquet files in row order (``coco_json.ImageRows``)."""

    def __init__(self, images: ParquetImages, positions: dict[str, int]) -> None:
        self.images, self.positions = images, positions

    def read(self, images: list[CocoImage]) -> Iterator[Any]:
        wanted = [image.file_name for image in images]
        if not wanted:
            return
        at = 0
        for row in self.images.stream(self.positions[wanted[0]]):
            if row.id != wanted[at]:
                continue
            yield row.data if row.data and not row.damaged else Rejection(row.damaged or row.missing)
            at += 1
            if at == len(wanted):
                return

    def sizes(self, images: list[CocoImage]) -> np.ndarray:
        sizes = self.images.row_sizes()
        return np.array([sizes[self.positions[image.file_name]] for image in images], dtype=np.int64)


def read_hub_detection(files: list[Path], config: ConvertHubDetectionConfig) -> CocoIndex:
    """The checked COCO index of the Parquet ``files``; the images' bytes stay in the files until packed."""
    root = _common_root(files)
    names: tuple[str, ...] | None = None
    rows: list[_Row] = []
    rejected: list[tuple[str, str]] = []
    positions: dict[str, int] = {}
    for file in files:
        name = str(file.relative_to(root))
        try:
            reader = open_parquet(file)
            schema = reader.schema_arrow
        except DAMAGED_PARQUET as e:  # the file is one row of the source, as parquet_images streams it
            rejected.append((name, f"not a readable Parquet file ({plain(e)})"))
            positions[name] = len(positions)
            continue
        _check_columns(file, schema, config)
        found = _category_names(schema, config.objects_column, file)
        if found is not None and names is not None and found != names:
            raise UsageError(f"{file}: its category names differ from those of {files[0]}")
        names = found or names
        columns = [config.objects_column] + [c for c in SIZE_COLUMNS if c in schema.names]
        first = 0  # the group's first row in the file
        for group in range(reader.metadata.num_row_groups):
            end = first + reader.metadata.row_group(group).num_rows
            try:
                values = reader.read_row_group(group, columns=columns).to_pylist()
            except DAMAGED_PARQUET as e:
                for row in range(first, end):
                    positions[f"{name}#{row}"] = len(positions)
                    rejected.append((f"{name}#{row}", f"row group {group} is damaged: {plain(e)}"))
                first = end
                continue
            for row, value in enumerate(values, first):
                row_id = f"{name}#{row}"
                positions[row_id] = len(positions)
                try:
                    rows.append(_row(row_id, positions[row_id], value, config.objects_column))
                except ValueError as e:
                    rejected.append((row_id, str(e)))
            first = end
    if config.classes_file is not None:
        names = read_class_names(config.classes_file)
    named = names is not None
    if names is None:
        used = max((c for row in rows for c, _, _ in row.objects if c < MAX_CLASSES), default=0)
        names = tuple(str(k) for k in range(used + 1))
    stream = ParquetImages(root, tuple(files), config.image_column, "", (), ())
    _read_missing_sizes(rows, stream, rejected)
    good = []
    for row in rows:
        bad = next((c for c, _, _ in row.objects if c >= len(names)), None)
        if bad is None:
            good.append(row)
        else:
            rejected.append((row.id, f"category {bad} is not one of the {len(names)} "
                                     f"{'names' if named else 'categories'} (0..{len(names) - 1})"))
    rejected.sort(key=lambda where_reason: positions.get(where_reason[0], 0))  # in row order
    document = SourceDocument(categories=list(enumerate(names)), rejected=rejected)
    image_ids = _image_ids(good, str(config.images))
    for row, image_id in zip(good, image_ids, strict=True):
        if row.size is not None:
            width, height = row.size
            document.add_image(row.id, width, height, [
                (c, _coco_box(box, config.bbox_format, width, height), crowd) for c, box, crowd in row.objects],
                image_id=image_id)
    identity = [(str(f.relative_to(root)), f.stat().st_size) for f in files]  # a changed file starts again
    index = document.index(str(config.images), "hub-detection", str(config.objects_column), identity=identity)
    index.image_rows = ParquetRows(stream, positions)
    return index


def _image_ids(rows: list[_Row], where: str) -> list[int]:
    """Each row's image id: its ``image_id`` (its position + 1 without one); every row numbered by position when
    two rows would share one (a folder of files whose ids restart, or a repeat). Each row holds its own objects,
    so it is its own image: a shared id would make COCO's index reject both rows' boxes as unplaceable."""
    ids = [row.image_id if row.image_id is not None else row.position + 1 for row in rows]
    if len(set(ids)) == len(ids):
        return ids
    seen: set[int] = set()
    repeat = next(i for i in ids if i in seen or seen.add(i))
    warn_once("hub-detection-image-ids", f"{where}: image_id {repeat} is given to more than one row (each row is "
              "its own image, its objects its own): images are numbered by row instead (1..N in row order)")
    return [row.position + 1 for row in rows]


def _check_columns(file: Path, schema: pa.Schema, config: ConvertHubDetectionConfig) -> None:
    """UsageError naming the file unless it holds the image column and an objects column with bbox and category."""
    for column in (config.image_column, config.objects_column):
        if column not in schema.names:
            raise UsageError(f"{file}: no column {column!r} (columns: {', '.join(schema.names)}); a Hub detection "
                             "Parquet holds an image column and an objects column")
    check_image_column(file, schema, config.image_column)
    kind = schema.field(config.objects_column).type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        kind = kind.value_type
    if not pa.types.is_struct(kind) or any(kind.get_field_index(f) < 0 for f in ("bbox", "category")):
        raise UsageError(f"{file}: column {config.objects_column!r} is {str(kind)[:120]}, not objects holding bbox "
                         "and category")


def _category_names(schema: pa.Schema, column: str, file: Path) -> tuple[str, ...] | None:
    """The ClassLabel names of the objects' ``category`` in HF's features (``List``/``Sequence`` wrappers of the
    objects or of the category unwrapped: ``datasets`` writes both), or None."""
    feature: Any = _features(schema, file).get(column)
    for _ in range(4):
        if isinstance(feature, dict) and "category" not in feature and isinstance(feature.get("feature"), dict):
            feature = feature["feature"]
    feature = feature.get("category") if isinstance(feature, dict) else None
    for _ in range(4):
        if isinstance(feature, dict) and "names" not in feature and isinstance(feature.get("feature"), dict):
            feature = feature["feature"]
    names = feature.get("names") if isinstance(feature, dict) else None
    if isinstance(names, list) and names and all(isinstance(n, str) for n in names):
        return tuple(names)
    return None


def _row(row_id: str, position: int, value: dict, column: str) -> _Row:
    """One row's objects checked (ValueError with the reason in one line), its image id and size if given."""
    objects = value.get(column)
    if isinstance(objects, list):  # a list of structs: as a struct of lists
        objects = {key: [o.get(key) if isinstance(o, dict) else None for o in objects]
                   for key in ("bbox", "category", "iscrowd")}
    if not isinstance(objects, dict):
        raise ValueError(f"no objects ({column} is null)")
    boxes, categories = objects.get("bbox") or [], objects.get("category") or []
    crowds = objects.get("iscrowd") or [0] * len(boxes)
    if not len(boxes) == len(categories) == len(crowds):
        raise ValueError(f"{len(boxes)} bboxes, {len(categories)} categories and {len(crowds)} iscrowd flags: one "
                         "each an object")
    checked = []
    for k, (box, category, crowd) in enumerate(zip(boxes, categories, crowds, strict=True)):
        if not (isinstance(box, list) and len(box) == 4 and all(_number(v) and math.isfinite(v) for v in box)):
            raise ValueError(f"object {k}: bbox {str(box)[:80]} is not 4 finite numbers")
        if not (_integer(category) and category >= 0):
            raise ValueError(f"object {k}: category {str(category)[:20]} is not a non-negative integer")
        if crowd not in (0, 1, None) or isinstance(crowd, float):
            raise ValueError(f"object {k}: iscrowd {str(crowd)[:20]} is not 0 or 1")
        checked.append((category, [float(v) for v in box], bool(crowd)))
    width, height = value.get("width"), value.get("height")
    size = (width, height) if _integer(width) and _integer(height) and width > 0 and height > 0 else None
    image_id = value.get("image_id")
    return _Row(row_id, position, image_id if _integer(image_id) else None, size, checked)


def _read_missing_sizes(rows: list[_Row], stream: ParquetImages, rejected: list[tuple[str, str]]) -> None:
    """The sizes of rows without width and height, from their images' headers (as stored: HF's readers and
    torchvision's do not turn an image by its EXIF, so its boxes are in the stored pixels); a row whose image
    does not open is rejected."""
    missing = {row.id: row for row in rows if row.size is None}
    if not missing:
        return
    for parquet_row in stream.stream(min(row.position for row in missing.values())):
        row = missing.get(parquet_row.id)
        if row is None:
            continue
        data = parquet_row.data
        try:
            if not data or parquet_row.damaged:
                raise OSError(parquet_row.damaged or parquet_row.missing)
            if not isinstance(data, bytes):  # a path-only row: its file's header, through the gate
                with open_input(data.path) as file:
                    data = file.read(HEADER_BYTES)
            with Image.open(io.BytesIO(data)) as image:  # the header only: PIL reads pixels on demand
                row.size = image.size
        except Exception as e:  # noqa: BLE001 - a damaged image: PIL raises what it raises, named in one line
            rejected.append((row.id, f"its image's size is not readable ({plain(e)})"))
    rows[:] = [row for row in rows if row.size is not None]


def _coco_box(box: list[float], bbox_format: str, width: int, height: int) -> list[float]:
    """A box in ``bbox_format`` as COCO's xywh in pixels."""
    if bbox_format == "xyxy":
        return xywh(box)
    if bbox_format == "yolo":
        cx, cy, w, h = box
        return [(cx - w / 2) * width, (cy - h / 2) * height, w * width, h * height]
    return box


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
