"""The box and mask targets of an opened image data set: one source's columns, or a mixture's end to end.

``TargetColumns.open(shards)`` reads the declared target columns of each source
(``formats.coco.coco_fields``: flat numpy arrays over the memory-mapped table,
no Python object per box), maps each source's labels into the mixture's
combined classes (``class_map``, as the table's labels), and adds the rows whose
targets are wrong (``target_faults``) to the data set's faulty rows, so reading
one is a named per-sample error under ``on_error``, as a bad table row is.
``objects(ids)`` gathers a batch's boxes in id order; ``mask(...)`` decodes one
object's RLE (checked: ``coco_rle``) at its packed image's size.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from dataio.formats.coco.coco_fields import (Objects, TargetArrays, ragged_index, declares_boxes, declares_keypoints,
                                             declares_masks, read_target_arrays, target_faults)
from dataio.formats.coco.coco_keypoints import flip_indices
from dataio.augment.mask_targets import resample_masks
from dataio.formats.coco.coco_rle import decode_rle
from dataio.formats.dataset.manifest import Manifest
from dataio.formats.dataset.sample_table import SampleTable
from dataio.formats.errors import ConfigError, DataioError
from dataio.images.image_shards import ImageShards

log = logging.getLogger("dataio")


MASK_CHUNK_BYTES = 16 << 20  # masks decoded at full size at once (54 at 640x480, 1 at the pixel limit); ~3x peak


@dataclass(frozen=True)
class BatchObjects(Objects):
    """``Objects`` of a batch, with where each object's mask is: its source (part) and row there."""

    mask_parts: np.ndarray | None = None  # (T,) int64


def folder_parts(shards: ImageShards) -> list[tuple[str, Manifest, SampleTable]]:
    """(name, manifest, table) of each source, in the combined table's order (one source: one part)."""
    if shards.mixture is None:
        return [(str(shards.folder), shards.manifest, shards.table)]
    return [(f"source {name!r} ({s.folder})", s.manifest, s.table) for name, s in shards.mixture.sources.items()]


def has_boxes(shards: ImageShards) -> bool:
    """Whether the data set's folders declare box targets (a mixture: whether any does)."""
    return any(declares_boxes(manifest.sample_fields()) for _, manifest, _ in folder_parts(shards))


def shared_keypoint_names(parts: list[tuple[str, Manifest, SampleTable]]) -> tuple[str, ...]:
    """The keypoint names every source declares (``coco_keypoints``), in stored order; () when one declares none
    or other names: a mixture of person and plain COCO folders reads boxes alone (no points to line up in the
    plain one's objects, and zero-visibility stand-ins would teach a keypoint head that nothing is there), said
    in one line naming the sources without them."""
    found: dict[tuple[str, ...], list[str]] = {}
    for where, manifest, _ in parts:
        names = manifest.options.get("keypoints") if declares_keypoints(manifest.sample_fields()) else None
        key = tuple(names) if isinstance(names, list) and all(isinstance(n, str) for n in names) else ()
        found.setdefault(key, []).append(where)
    if len(found) == 1:
        return next(iter(found))
    if any(found):
        plain = [where for key, wheres in found.items() if key != max(found, key=len) for where in wheres]
        log.warning("keypoints not read: the mixture's sources do not all hold the same keypoints (%s: none or "
                    "other names); its batches carry boxes alone", ", ".join(plain))
    return ()


class ObjectsWithoutMasks(DataioError):
    """A source holding objects without a segmentation, read with ``DetectionConfig(require_masks=True)``."""


def objects_without_masks(where: str, arrays: TargetArrays, table: SampleTable) -> None:
    """ObjectsWithoutMasks naming ``where``, how many of its objects have no mask and the first one's sample."""
    assert arrays.masks is not None
    empty = np.flatnonzero(pc.binary_length(arrays.masks).to_numpy(zero_copy_only=False) == 0)
    if len(empty):
        row = int(np.searchsorted(arrays.offsets["masks"], empty[0], side="right") - 1)
        key = table.table.column("key")[row].as_py()
        raise ObjectsWithoutMasks(f"{where}: {len(empty):,} of its {len(arrays.masks):,} objects have no segmentation "
                                  f"(box-only annotations; the first in sample {key!r}): their masks would be all "
                                  "background")


class TargetColumns:
    """Each source's ``TargetArrays``, its first combined sample id and its label map into the combined classes."""

    def __init__(self, shards: ImageShards, masks: bool, require_masks: bool = False) -> None:
        parts = folder_parts(shards)
        for where, manifest, _ in parts:
            fields = manifest.sample_fields()
            if not declares_boxes(fields):
                raise ConfigError(f"{{0}}: {where} declares no boxes (pack COCO data with `dataio convert coco`; a "
                                  "mixture's sources all hold boxes, or none)", "targets")
            if masks and not declares_masks(fields):
                raise ConfigError(f"{{0}}.masks: {where} holds no masks (its COCO JSON had no segmentations)",
                                  "targets")
        self.arrays: list[TargetArrays] = []
        self.starts = np.zeros(len(parts), np.int64)
        self.label_maps: list[np.ndarray | None] = []
        self.skips: list[np.ndarray] = []
        self.table = shards.table
        self.keypoint_names = shared_keypoint_names(parts)
        first = 0
        for index, (where, manifest, table) in enumerate(parts):
            try:
                arrays = read_target_arrays(table.table, masks, len(self.keypoint_names))
            except ValueError as e:
                raise ValueError(f"{where}: {e}") from None
            if masks and require_masks:
                objects_without_masks(where, arrays, table)
            faults = target_faults(arrays, table.width, table.height, len(manifest.classes))
            skip = np.zeros(len(table), bool)
            skip[list(faults)] = True
            for row, reason in faults.items():
                shards.faults.setdefault(first + row, f"targets: {reason}")
            name = shards.mixture.names[index] if shards.mixture is not None else None
            per_source = shards.mixture.class_map.per_source if shards.mixture is not None else None
            self.label_maps.append(np.asarray(per_source[name], np.int64) if per_source and name else None)
            self.arrays.append(arrays)
            self.skips.append(skip)
            self.starts[index] = first
            first += len(table)

    @property
    def keypoint_flips(self) -> np.ndarray:
        """(K,) where each keypoint goes when an image is mirrored (``coco_keypoints.flip_indices``)."""
        return flip_indices(self.keypoint_names)

    def image_ids(self, ids: np.ndarray) -> np.ndarray:
        """(N,) COCO image ids of samples ``ids``."""
        part = np.searchsorted(self.starts, ids, side="right") - 1
        return np.array([self.arrays[p].image_id[i - self.starts[p]]
                         for p, i in zip(part.tolist(), ids.tolist(), strict=True)],
                        dtype=np.int64)

    def objects(self, ids: np.ndarray) -> BatchObjects:
        """The objects of samples ``ids`` in order (labels in the combined classes); faulty rows have none."""
        ids = np.asarray(ids, dtype=np.int64)
        part = np.searchsorted(self.starts, ids, side="right") - 1
        if len(self.arrays) == 1:
            found = self.arrays[0].gather(ids, self.skips[0])
            return BatchObjects(found.boxes, found.labels, found.iscrowd, found.counts, found.mask_rows,
                                keypoints=found.keypoints,
                                mask_parts=None if found.mask_rows is None else np.zeros(len(found.labels), np.int64))
        gathered = {}
        counts = np.zeros(len(ids), np.int64)
        for p in np.unique(part).tolist():
            where = np.flatnonzero(part == p)
            gathered[p] = (where, self.arrays[p].gather(ids[where] - self.starts[p], self.skips[p]))
            counts[where] = gathered[p][1].counts
        total = int(counts.sum())
        begins = np.concatenate([[0], np.cumsum(counts)[:-1]])
        boxes, labels = np.zeros((total, 4), np.float32), np.zeros(total, np.int64)
        iscrowd, with_masks = np.zeros(total, bool), self.arrays[0].masks is not None
        mask_rows, mask_parts = np.zeros(total, np.int64), np.zeros(total, np.int64)
        keypoints = np.zeros((total, len(self.keypoint_names), 3)) if self.keypoint_names else None
        for p, (where, found) in gathered.items():
            rows = ragged_index(begins[where], found.counts)
            label_map = self.label_maps[p]
            boxes[rows], iscrowd[rows] = found.boxes, found.iscrowd
            if keypoints is not None:
                keypoints[rows] = found.keypoints
            labels[rows] = found.labels if label_map is None else label_map[found.labels]
            if with_masks:
                mask_rows[rows], mask_parts[rows] = found.mask_rows, p
        return BatchObjects(boxes, labels, iscrowd, counts, mask_rows if with_masks else None, keypoints=keypoints,
                            mask_parts=mask_parts if with_masks else None)

    def mask(self, part: int, row: int, sample: int) -> np.ndarray:
        """(H, W) uint8 mask of one object of ``sample`` (a combined id) at its packed image's size; all zeros for
        an object without a segmentation. ValueError if its RLE does not cover the image exactly."""
        height, width = int(self.table.height[sample]), int(self.table.width[sample])
        counts = self.arrays[part].rle(row)
        if not counts:
            return np.zeros((height, width), np.uint8)
        return decode_rle(counts, height, width)

    def resampled_masks(self, parts: np.ndarray, rows: np.ndarray, sample: int, forward: np.ndarray,
                        size: int | tuple[int, int]) -> np.ndarray:
        """(K, H, W) uint8 masks (``size``: a side, or (H, W)) of objects (``parts``, ``rows``) of ``sample``
        through its axis-aligned ``forward`` map, ``MASK_CHUNK_BYTES`` decoded at a time: a sample of thousands
        of objects never holds them all at its full size (10,000 at 640x480: 3 GB). ValueError as ``mask``."""
        height, width = (size, size) if isinstance(size, int) else size
        out = np.zeros((len(rows), height, width), np.uint8)
        chunk = max(1, MASK_CHUNK_BYTES // max(1, int(self.table.width[sample]) * int(self.table.height[sample])))
        for first in range(0, len(rows), chunk):
            decoded = np.stack([self.mask(int(p), int(r), sample) for p, r in
                                zip(parts[first:first + chunk], rows[first:first + chunk], strict=True)])
            out[first:first + len(decoded)] = resample_masks(decoded, forward, width, height)
        return out
