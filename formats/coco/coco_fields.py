"""The declared fields of a COCO folder and their sample-table columns, read back and checked against the rows.

A COCO sample is an image member and, as columns of the sample table
(``sample_fields``): ``image_id`` (COCO's), ``boxes`` (a ``list<float32>`` of
the objects' x0, y0, x1, y1, flattened, in the packed image's pixels),
``labels`` (``list<int32>``, 0..K-1 in the order of the category ids),
``iscrowd`` (``list<uint8>``) and, when the JSON has segmentations, ``masks``
(``list<large_binary>``: COCO's compressed RLE string per object, empty for an
object without one). The table has no ``label`` column: a sample's classes are
its objects' (a folder packed before December 2026 has one, the label of the
image's largest object, which readers pass over).

``TargetArrays`` reads them for a whole table at once, as numpy views of the
Arrow buffers where the types allow (no Python object per box), and
``target_faults`` names the rows that disagree with themselves or the
manifest (counts that differ between columns, a box outside its image or
not finite, a label outside the classes, more than ``MAX_OBJECTS`` objects, a
size past the decoders' ``MAX_PIXELS``: a mask is H x W bytes): the readers drop those rows with
their reason, as ``table_faults``'s, and ``verify`` lists them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from dataio.formats.dataset.sample_fields import FieldSpec, image_field
from dataio.formats.limits import MAX_PIXELS

BOX_COLUMNS = ("image_id", "boxes", "labels", "iscrowd")
COLUMN_TYPES = {"image_id": pa.int64(), "boxes": pa.list_(pa.float32()), "labels": pa.list_(pa.int32()),
                "iscrowd": pa.list_(pa.uint8()), "masks": pa.list_(pa.large_binary()), "keypoints": pa.list_(pa.float32())}
EDGE = 1e-3  # pixels a stored box may pass its image's edge by (float32 rounding of the edge itself)
# a stored box's least width and height in its packed image's pixels: a thinner one bounds no object (packing refuses
# those under coco_json.MIN_BOX_SIDE in the JSON's pixels, and any a --max-side scaling thins below this); ``verify``
# names them in folders packed before, the readers keep dropping them by ``min_side`` as they always did
MIN_STORED_SIDE = 1e-3
# objects one sample may hold: a batch's boxes are padded to its busiest sample's count and its masks cost
# S x S bytes an object (10,000 at 224: 500 MB, 20 s to resample); COCO's busiest image has 93, LVIS's ~700
MAX_OBJECTS = 10_000


def declared_coco_fields(options: dict[str, Any]) -> tuple[FieldSpec, ...]:
    """The fields a COCO folder declares, from its manifest's options (``masks``: its JSON has segmentations)."""
    return (image_field(options), FieldSpec(name="image_id", kind="array", dtype="int64"),
            FieldSpec(name="boxes", kind="boxes", dtype="float32"),
            FieldSpec(name="labels", kind="class", dtype="int32"),
            FieldSpec(name="iscrowd", kind="array", dtype="uint8"),
            *((FieldSpec(name="masks", kind="masks", dtype="coco_rle"),) if options.get("masks") else ()),
            *((FieldSpec(name="keypoints", kind="array", dtype="float32"),) if options.get("keypoints") else ()))


def declares_keypoints(fields: tuple[FieldSpec, ...]) -> bool:
    """Whether a folder's fields hold COCO keypoints (3 x K float32 an object; the names are the manifest's
    ``keypoints`` option)."""
    return any(f.name == "keypoints" and f.stored == "column" for f in fields)


def declares_boxes(fields: tuple[FieldSpec, ...]) -> bool:
    """Whether a folder's fields hold box targets (a ``boxes`` column of kind boxes)."""
    return any(f.name == "boxes" and f.kind == "boxes" and f.stored == "column" for f in fields)


def declares_masks(fields: tuple[FieldSpec, ...]) -> bool:
    return any(f.name == "masks" and f.kind == "masks" and f.stored == "column" for f in fields)


@dataclass(frozen=True)
class TargetArrays:
    """One table's targets as flat arrays: sample ``i``'s values of column ``c`` are
    ``values[c][offsets[c][i]:offsets[c][i + 1]]`` (boxes: 4 a box, flattened)."""

    image_id: np.ndarray  # (N,) int64
    values: dict[str, np.ndarray]  # boxes float32 (4 a box), labels int32, iscrowd uint8
    offsets: dict[str, np.ndarray]  # per column, (N + 1,) int64 from 0 (masks' too)
    masks: pa.Array | None  # every object's RLE string (large_binary), or None
    keypoint_count: int = 0  # K: keypoints an object (its values: 3 x K floats), 0 for a folder without

    def counts(self, name: str) -> np.ndarray:
        """Each row's list length in column ``name`` (boxes: values, 4 a box)."""
        return np.diff(self.offsets[name])

    def gather(self, ids: np.ndarray, skip: np.ndarray | None = None) -> Objects:
        """The objects of samples ``ids``, in order; samples where ``skip`` (N,) is True get none (rows whose
        columns disagree: ``target_faults`` names them, and the readers drop them)."""
        ids = np.asarray(ids, dtype=np.int64)
        objects = self.counts("boxes")[ids] // 4
        if skip is not None:
            objects = np.where(skip[ids], 0, objects)
        boxes = self.values["boxes"][ragged_index(self.offsets["boxes"][ids], objects * 4)].reshape(-1, 4)
        rows = {name: ragged_index(self.offsets[name][ids], objects) for name in ("labels", "iscrowd", "masks")
                if name in self.offsets}
        keypoints = None
        if self.keypoint_count:
            k = 3 * self.keypoint_count
            keypoints = self.values["keypoints"][ragged_index(self.offsets["keypoints"][ids], objects * k)]
            keypoints = keypoints.astype(np.float64).reshape(-1, self.keypoint_count, 3)
        return Objects(boxes=boxes, labels=self.values["labels"][rows["labels"]].astype(np.int64),
                       iscrowd=self.values["iscrowd"][rows["iscrowd"]].astype(bool), counts=objects,
                       mask_rows=rows.get("masks"), keypoints=keypoints)

    def rle(self, row: int) -> bytes:
        """Object ``row``'s compressed RLE string (a row of ``Objects.mask_rows``; b'' for none)."""
        assert self.masks is not None
        return self.masks[row].as_py()


@dataclass(frozen=True)
class Objects:
    """The objects of a batch of samples, sample ``i`` owning the next ``counts[i]`` rows."""

    boxes: np.ndarray  # (T, 4) float32 xyxy, the packed images' pixels
    labels: np.ndarray  # (T,) int64
    iscrowd: np.ndarray  # (T,) bool
    counts: np.ndarray  # (N,) int64
    mask_rows: np.ndarray | None  # (T,) rows of ``TargetArrays.masks``
    keypoints: np.ndarray | None = None  # (T, K, 3) float64 x, y, visibility, or None for a folder without


def ragged_index(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The flat indices ``starts[i] .. starts[i] + counts[i] - 1`` for each i, in order."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    first = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    return first + np.arange(total)


def read_target_arrays(table: pa.Table, with_masks: bool, keypoint_count: int = 0) -> TargetArrays:
    """The target columns of a sample table (ValueError naming a column that is missing or of another type);
    ``keypoint_count`` K > 0 reads the ``keypoints`` column too."""
    names = BOX_COLUMNS + (("masks",) if with_masks else ()) + (("keypoints",) if keypoint_count else ())
    for name in names:
        if name not in table.schema.names:
            raise ValueError(f"sample table column {name!r} is missing")
        if table.schema.field(name).type != COLUMN_TYPES[name]:
            raise ValueError(f"sample table column {name!r} has type {table.schema.field(name).type}, expected "
                             f"{COLUMN_TYPES[name]}")
    values, offsets, masks = {}, {}, None
    for name in names[1:]:
        array = _one_chunk(table.column(name))
        try:  # the IPC reader checks buffer sizes, not offsets: a tampered one would crash pyarrow (bad_alloc)
            array.validate(full=True)  # or index past the values; O(rows + objects), ~10 ms a million rows
        except pa.ArrowInvalid as e:
            raise ValueError(f"sample table column {name!r} is damaged ({e})") from None
        if array.null_count or array.values.null_count:
            raise ValueError(f"sample table column {name!r} has empty (null) values")
        bounds = array.offsets.to_numpy().astype(np.int64)  # a sliced array's own offsets, into all its values
        offsets[name] = bounds - bounds[0]
        if name == "masks":
            masks = array.values.slice(int(bounds[0]), int(bounds[-1] - bounds[0]))
        else:
            values[name] = array.values.to_numpy(zero_copy_only=False)[bounds[0]:bounds[-1]]
    if table.column("image_id").null_count:  # to_numpy would make them NaN, then no integer
        raise ValueError("sample table column 'image_id' has empty (null) values")
    return TargetArrays(image_id=table.column("image_id").to_numpy(), values=values, offsets=offsets, masks=masks,
                        keypoint_count=keypoint_count)


def _one_chunk(column: pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)


def target_faults(targets: TargetArrays, widths: np.ndarray, heights: np.ndarray, num_classes: int) -> dict[int, str]:
    """Rows whose targets disagree with themselves or the manifest, each with the reason (vectorised)."""
    faults: dict[int, str] = {}
    values = targets.counts("boxes")
    for row in np.flatnonzero(values % 4).tolist():
        faults[row] = f"boxes hold {int(values[row])} values, not a multiple of 4"
    objects = values // 4
    pixels = widths.astype(np.int64) * heights.astype(np.int64)
    for row in np.flatnonzero((widths < 1) | (heights < 1) | (pixels > MAX_PIXELS)).tolist():  # masks: H x W each
        faults[row] = f"its size {int(widths[row])}x{int(heights[row])} is not one the readers decode (at most " \
                      f"{MAX_PIXELS:,} pixels)"
    for row in np.flatnonzero(objects > MAX_OBJECTS).tolist():
        faults.setdefault(row, f"{int(objects[row]):,} boxes, more than the {MAX_OBJECTS:,} a sample may hold")
    for name in ("labels", "iscrowd", "masks"):
        if name in targets.offsets:
            for row in np.flatnonzero(targets.counts(name) != objects).tolist():
                faults.setdefault(row, f"{int(objects[row])} boxes but {int(targets.counts(name)[row])} {name}")
    if targets.keypoint_count:
        k = 3 * targets.keypoint_count
        for row in np.flatnonzero(targets.counts("keypoints") != objects * k).tolist():
            faults.setdefault(row, f"{int(objects[row])} boxes but {int(targets.counts('keypoints')[row])} keypoint "
                                   f"values (3 x {targets.keypoint_count} a box)")
    disagree = np.zeros(len(objects), bool)
    disagree[list(faults)] = True
    found = targets.gather(np.arange(len(objects)), skip=disagree)
    owners = np.repeat(np.arange(len(objects)), found.counts)
    b = found.boxes.astype(np.float64)
    bad = ~np.isfinite(b).all(axis=1) | (b[:, 2] < b[:, 0]) | (b[:, 3] < b[:, 1]) | (b[:, :2] < -EDGE).any(axis=1)
    bad |= (b[:, 2] > widths[owners] + EDGE) | (b[:, 3] > heights[owners] + EDGE)
    for row in np.flatnonzero(bad).tolist():
        faults.setdefault(int(owners[row]), f"box {b[row].round(2).tolist()} is not inside its "
                                            f"{int(widths[owners[row]])}x{int(heights[owners[row]])} image")
    if found.keypoints is not None:
        for row in np.flatnonzero(~np.isfinite(found.keypoints).all(axis=(1, 2))).tolist():
            faults.setdefault(int(owners[row]), "its keypoints are not all finite numbers")
        visibility = found.keypoints[..., 2]
        for row, point in zip(*np.nonzero((visibility != 0) & (visibility != 1) & (visibility != 2)), strict=True):
            faults.setdefault(int(owners[row]), f"keypoint {int(point)}'s visibility {visibility[row, point]:g} is "
                                                "not 0, 1 or 2")
    for row in np.flatnonzero((found.labels < 0) | (found.labels >= num_classes)).tolist():
        faults.setdefault(int(owners[row]), f"box label {int(found.labels[row])} is not in 0..{num_classes - 1}")
    return faults


def thin_boxes(targets: TargetArrays, skip: np.ndarray) -> dict[int, str]:
    """Rows (not in ``skip``) holding a box under ``MIN_STORED_SIDE`` wide or high, with the first such box: what
    ``verify`` names in a folder packed before packing refused them (the readers drop such boxes by ``min_side``)."""
    found = targets.gather(np.arange(len(skip)), skip=skip)
    owners = np.repeat(np.arange(len(skip)), found.counts)
    b = found.boxes.astype(np.float64)
    thin = np.minimum(b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]) < MIN_STORED_SIDE
    faults: dict[int, str] = {}
    for row in np.flatnonzero(thin).tolist():
        faults.setdefault(int(owners[row]), f"box {b[row].round(4).tolist()} is {b[row, 2] - b[row, 0]:.3g} x "
                                            f"{b[row, 3] - b[row, 1]:.3g} px: no area, it bounds no object (packing "
                                            "refuses such boxes now; pack the folder again)")
    return faults
