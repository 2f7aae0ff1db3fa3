"""``dataio convert coco IMAGES ANNOTATIONS.json OUT``: COCO detection and segmentation data to image shards.

The output is an image shard folder (``convert images``'s: tars with their DALI
index, ``samples.arrow``, ``rejected.jsonl``, ``manifest.json`` last) whose
manifest declares the kind ``detection`` and the COCO fields (``coco_fields``):
each sample's boxes, labels, crowd flags and masks are columns of the sample
table (which has no single ``label`` column: a sample's classes are its
objects'), so every image reader opens the folder, and the detection loader
reads them. The classes are the categories' names in the order of their ids.

Checks: the JSON as ``coco_json`` reads it (each bad image or annotation
rejected with its reason), then each image as ``image_prepare`` checks any
packed image (decodes, damage, size limits), against the size the JSON gives it;
its annotations are moved with its pixels (``coco_targets``). Images without a
good annotation are packed, or skipped with ``skip_empty`` (counted, not
rejected). The rest is ``convert images``'s machinery: workers in order
(byte-identical output whatever their count), a journal per finished shard
(a killed run resumes, byte-identical), a rank's share of the images
(``rank_split``, by bytes) and the merge by the last rank to finish.
"""

from __future__ import annotations

import json
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from dataio.formats.file_gate import FileRefused
from dataio.formats.coco.coco_fields import COLUMN_TYPES
from dataio.formats.coco.coco_json import MAX_ANNOTATIONS_BYTES, CocoImage, CocoIndex, read_coco_json
from dataio.formats.coco.coco_keypoints import flip_indices, keypoint_options
from dataio.formats.coco.coco_targets import PreparedTargets, prepare_coco_image, pycocotools_mask
from dataio.formats.dataset.convert_journal import Journal, JournalledShards, fingerprint
from dataio.formats.dataset.manifest import MANIFEST_NAME, SAMPLE_TABLE_NAME, Manifest, ShardEntry, version_for
from dataio.formats.dataset.out_lock import locked_output
from dataio.formats.dataset.sample_table import CHECKSUM_FIELD, RECORD_SIZE_FIELD, sample_checksum, write_sample_table
from dataio.formats.dataset.wds_shards import ShardWriter, scan_tar
from dataio.formats.errors import NothingConverted, UsageError
from dataio.formats.fallback_log import warn_once
from dataio.formats.files import sha256_file, write_atomic
from dataio.formats.images.image_convert import REJECTED_NAME
from dataio.formats.images.parquet_images import LocalFile
from dataio.formats.remote.source_files import RemoteRoot, SourceUnreadable, remote_root
from dataio.formats.images.image_prepare import WITHOUT_CODEC, ImagePrepareConfig, Rejection, add_restart_markers
from dataio.formats.images.image_tree import errno_text, escape_path, read_regular_file
from dataio.formats.kinds import kind_named
from dataio.formats.progress import progress
from dataio.formats.ranks.rank_merge import merge_if_complete
from dataio.formats.ranks.rank_split import rank_folder, rank_range
from dataio.formats.sizes import parse_size
from dataio.formats.worker_pool import ordered_map

_OUTPUT_PATTERNS = ("shard-*.tar", "shard-*.idx", ".shard-*", MANIFEST_NAME, SAMPLE_TABLE_NAME, REJECTED_NAME)


@dataclass(frozen=True, kw_only=True)
class ConvertCocoConfig:
    """Everything ``dataio convert coco`` takes."""

    images: Path | RemoteRoot  # the folder the JSON's file_name values are relative to (a URL: s3://, https://)
    annotations: Path | RemoteRoot  # COCO's instances JSON (a URL too)
    out: Path
    skip_empty: bool = False  # images without a good annotation: packed (False) or skipped, counted
    shard_size: int = 256 * 10**6
    max_shard_samples: int | None = None
    num_workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    strict: bool = False
    overwrite: bool = False
    progress: bool = True
    prepare: ImagePrepareConfig = field(default_factory=ImagePrepareConfig)
    max_annotations_bytes: int = MAX_ANNOTATIONS_BYTES
    rank: int = 0
    world_size: int = 1
    storage_options: dict | None = field(default=None, repr=False)  # URL sources' backend options (secrets)

    def __post_init__(self) -> None:
        for name in ("images", "annotations", "out"):
            given = getattr(self, name)
            object.__setattr__(self, name, (remote_root(given, self.storage_options) if name != "out" else None)
                               or Path(given))
        object.__setattr__(self, "shard_size", parse_size(self.shard_size))
        object.__setattr__(self, "max_annotations_bytes", parse_size(self.max_annotations_bytes))
        if self.num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {self.num_workers}")
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank must be in 0..world_size-1 and world_size >= 1, got {self.rank} of {self.world_size}")
        if self.max_shard_samples is not None and self.max_shard_samples < 1:
            raise ValueError("max_shard_samples must be >= 1")
        if self.max_annotations_bytes < 1:
            raise ValueError("max_annotations_bytes must be >= 1")


@dataclass(frozen=True)
class CocoSummary:
    """What a conversion did."""

    num_samples: int
    num_boxes: int
    num_masks: int
    num_shards: int
    num_converted: int
    num_empty: int  # images without a good annotation (packed, or skipped with skip_empty)
    skipped_empty: bool
    out: Path
    rejected: tuple[dict[str, str], ...]

    @property
    def num_rejected(self) -> int:
        return len(self.rejected)

    def line(self) -> str:
        annotations = sum("#annotation" in r["path"] for r in self.rejected)
        empty = f", {self.num_empty} without annotations {'skipped' if self.skipped_empty else 'kept'}"
        listed = f", listed in {self.out / REJECTED_NAME}" if self.rejected else ""
        return (f"packed {self.num_samples} images with {self.num_boxes} boxes ({self.num_masks} masks) into "
                f"{self.num_shards} shards in {self.out} ({self.num_converted} re-encoded, "
                f"{len(self.rejected) - annotations} images and {annotations} annotations rejected{listed}"
                f"{empty if self.num_empty else ''})")


def _prepare_job(job: tuple) -> PreparedTargets | Rejection:
    """In a worker: one image file read (bounded), prepared, its annotations moved with it."""
    root, image, prepare, masks, flips, given = job  # root: a local folder's path, or a URL's RemoteRoot
    if isinstance(given, Rejection):
        return given
    if isinstance(given, bytes):  # a Parquet row's bytes, held to the limit of a file's
        if len(given) > prepare.max_file_size:
            return Rejection(f"image too large: {len(given):,} bytes (limit {prepare.max_file_size:,})")
        data = given
    else:
        try:  # regular files only; a link may leave the folder (images are decoded and checked: image_convert's)
            data = (read_regular_file(given.path, prepare.max_file_size) if isinstance(given, LocalFile) else
                    root.read(image.file_name, prepare.max_file_size) if isinstance(root, RemoteRoot) else
                    read_regular_file(os.path.join(root, image.file_name), prepare.max_file_size))
        except FileRefused as e:  # not a regular file, a kernel file, too large
            return Rejection(str(e))
        except OSError as e:
            return Rejection(f"cannot read: {errno_text(e)}")
        except SourceUnreadable as e:  # a remote image's storage failed past its retries: its one line
            return Rejection(str(e))
    result = prepare_coco_image(data, image.width, image.height, image.annotations, prepare, masks, flips)
    if isinstance(result, PreparedTargets):  # stored as float32: a resumed run's rows (JSON) are the same values
        result = replace(result, boxes=np.asarray(result.boxes, np.float32).reshape(-1, 4).tolist(),
                         keypoints=[np.asarray(k, np.float32).tolist() for k in result.keypoints])
    return result


def convert_coco(config: ConvertCocoConfig, source: CocoIndex | None = None) -> CocoSummary:
    """Pack the COCO data of ``config`` into ``config.out``; resumes an interrupted run. With ``world_size`` > 1,
    this rank's share of the images into ``OUT/rank-R-of-N``, merged by the last rank to finish. ``source``: the
    index a source layer read from another layout (YOLO, VOC, Hub Parquet), packed instead of the JSON's."""
    index, images, empty = coco_listing(config, source)
    if config.world_size == 1:
        summary = _pack(config, index, images, empty, index.rejected)
        if summary.num_samples == 0:
            raise NothingConverted(f"no image converted from {config.annotations}: " + (
                f"all were rejected (listed in {config.out / REJECTED_NAME})" if summary.rejected
                else "it lists no images" + (" with annotations" if config.skip_empty and empty else "")))
        return summary
    start, stop = rank_range(coco_sizes(config, index, images), config.rank, config.world_size)
    summary = pack_coco_piece(config, index, coco_piece(config, index, images, empty, start, stop, config.rank),
                              config.out / rank_folder(config.rank, config.world_size))
    merge_if_complete(config.out)
    return summary


def coco_listing(config: ConvertCocoConfig, source: CocoIndex | None = None) -> tuple[CocoIndex, list[CocoImage], int]:
    """The index (the JSON's, or ``source``), the images packed, and how many have no annotation."""
    index = read_coco_json(config.annotations, config.max_annotations_bytes) if source is None else source
    if index.has_segmentation:
        try:
            pycocotools_mask()
        except ImportError as e:
            raise UsageError(f"{config.annotations}: {e}") from None
    images = [image for image in index.images if image.annotations or not config.skip_empty]
    return index, images, sum(not image.annotations for image in index.images)


def coco_origin(config: ConvertCocoConfig, index: CocoIndex) -> dict[str, str]:
    """The manifest's source options: what a source layer recorded, else the COCO JSON's name and sha256."""
    return index.origin or {"source": "coco", "annotations": config.annotations.name,
                            "annotations_sha256": _sha256(config)}


def coco_sizes(config: ConvertCocoConfig, index: CocoIndex, images: list[CocoImage]) -> np.ndarray:
    """Each packed image's bytes: what a split conversion (ranks, a plan's items) balances."""
    return index.image_rows.sizes(images) if index.image_rows is not None else np.array(
        [_size(config.images / image.file_name) for image in images], dtype=np.int64)


def coco_piece(config: ConvertCocoConfig, index: CocoIndex, images: list[CocoImage], empty: int, start: int,
               stop: int, item: int) -> tuple[list[CocoImage], int, list[tuple[str, str]], int]:
    """Item ``item`` of a split conversion: its images, the empty ones it counts and what it lists as rejected.
    Images without annotations: each item counts those it packs; the skipped ones are counted by item 0."""
    here = empty * (item == 0) if config.skip_empty else sum(not i.annotations for i in images[start:stop])
    return images[start:stop], here, list(index.rejected) if item == 0 else [], start


def pack_coco_piece(config: ConvertCocoConfig, index: CocoIndex, piece: tuple[list[CocoImage], int, list, int],
                    out: Path) -> CocoSummary:
    """A rank's share or a plan's item packed into its part folder ``out`` (journal, resume, manifest of its own)."""
    part = replace(config, out=out, rank=0, world_size=1)
    part.out.mkdir(parents=True, exist_ok=True)
    return _pack(part, index, *piece, sized=True)


def _size(path: Path | RemoteRoot) -> int:
    try:
        return path.size() if isinstance(path, RemoteRoot) else os.stat(path).st_size
    except (OSError, SourceUnreadable):
        return 0


def _pack(config: ConvertCocoConfig, index: CocoIndex, images: list[CocoImage], empty: int,
          rejected_early: list[tuple[str, str]], first: int = 0, sized: bool = False) -> CocoSummary:
    """``sized``: a split conversion's part, whose table keeps each sample's size in the shard rule."""
    with locked_output(config.out):
        return _pack_locked(config, index, images, empty, rejected_early, first, sized)


def _options(config: ConvertCocoConfig, index: CocoIndex) -> dict:
    p = config.prepare
    return {**coco_origin(config, index),
            "categories": [list(category) for category in index.categories],
            "empty": "skip" if config.skip_empty else "keep", "masks": index.has_segmentation,
            **keypoint_options(index.keypoints),
            "sample_checksum": CHECKSUM_FIELD.name,
            "max_side": p.max_side, "quality": p.quality, "max_pixels": p.max_pixels, "max_file_size": p.max_file_size,
            "shard_size": config.shard_size, "restart_interval": p.restart_interval if add_restart_markers else 0,
            **({"max_shard_samples": config.max_shard_samples} if config.max_shard_samples else {})}


def _pack_locked(config: ConvertCocoConfig, index: CocoIndex, images: list[CocoImage], empty: int,
                 rejected_early: list[tuple[str, str]], first: int, sized: bool) -> CocoSummary:
    if add_restart_markers is None:
        warn_once("jpeg-codec-pack", WITHOUT_CODEC)
    options = _options(config, index)
    files = [(image.file_name, image.id) for image in images]
    journal = Journal(config.out, fingerprint({**options, "max_shard_samples": config.max_shard_samples}, files))
    shards_log = JournalledShards(journal, journal.start(config.out, config.overwrite, _OUTPUT_PATTERNS))
    done, start = shards_log.done, shards_log.start
    rows = [row for record in done for row in record.rows]
    record_sizes = [size for record in done for size in record.sizes]
    writer = ShardWriter(config.out, config.shard_size, config.max_shard_samples, first_index=len(done))
    bar = progress(total=len(images), initial=start, unit="img", desc="convert", enabled=config.progress)
    try:
        with writer:
            for position, (image, result) in enumerate(zip(images[start:], _prepared(config, index, images[start:],
                                                                                       index.has_segmentation),
                                                           strict=True), start):
                bar.update()
                pending = shards_log.pending
                if isinstance(result, Rejection):
                    pending.rejected.append({"path": escape_path(image.file_name.encode()), "reason": result.reason})
                    continue
                pending.rejected += [{"path": f"{config.annotations.name}#annotation {ann_id}",
                                      "reason": f"{reason} (image {image.file_name[:200]!r})"}
                                     for ann_id, reason in result.rejected]
                key = f"{first + len(rows):09d}"  # a part's: by its first image's position, unique when merged
                meta = {"path": image.file_name, "image_id": image.id, "width": result.image.width,
                        "height": result.image.height}
                entry = writer.write({"__key__": key, "jpg": result.image.jpeg, "json": json.dumps(meta)})
                if entry is not None:
                    shards_log.finished(writer.next_index - 1, entry, position)
                    pending = shards_log.pending  # the closed shard's successor: this sample's
                row = [escape_path(image.file_name.encode()), result.image.width, result.image.height,
                       sample_checksum(result.image.jpeg), image.id, result.boxes, result.labels,
                       [int(c) for c in result.iscrowd], result.masks, result.keypoints]
                rows.append(row)
                pending.rows.append(row)
                record_sizes.append(writer.record_sizes[-1])
                pending.sizes.append(writer.record_sizes[-1])
                pending.converted += result.image.converted
            entry = writer.close()
            if entry is not None:
                shards_log.finished(writer.next_index - 1, entry, len(images))
    finally:
        bar.close()
    shards_log.close()
    rejected = shards_log.rejected(rejected_early)
    shards = [ShardEntry(**record.entry) for record in done] + writer.entries
    locations = [scan_tar(config.out / e.file) for e in shards[:len(done)]] + writer.locations
    _write_table(config.out, locations, rows, index.has_segmentation, index.keypoints is not None,
                 record_sizes if sized else None)
    write_atomic(config.out / REJECTED_NAME, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rejected).encode())
    fields = kind_named("detection").part("fields")(options)
    Manifest(kind="images", num_samples=len(rows), shards=tuple(shards), classes=index.classes,
             num_rejected=len(rejected), options=options, fields=fields, sample_kind="detection",
             version=version_for("images", fields)).write(config.out)
    journal.finish()
    boxes = sum(len(row[6]) for row in rows)
    masks = sum(sum(bool(rle) for rle in row[8]) for row in rows)
    converted = shards_log.converted()
    return CocoSummary(len(rows), boxes, masks, len(shards), converted, empty, config.skip_empty, config.out,
                       tuple(rejected))


def _prepared(config: ConvertCocoConfig, index: CocoIndex, images: list[CocoImage],
              masks: bool) -> Iterator[PreparedTargets | Rejection]:
    flips = None if index.keypoints is None else flip_indices(index.keypoints.names)
    given = index.image_rows.read(images) if index.image_rows is not None else [None] * len(images)
    root = config.images if isinstance(config.images, RemoteRoot) else str(config.images)
    jobs = ((root, image, config.prepare, masks, flips, data)
            for image, data in zip(images, given, strict=True))
    return ordered_map(_prepare_job, jobs, config.num_workers, what="convert")


def _sha256(config: ConvertCocoConfig) -> str:
    """The annotations file's sha256 (a remote one's bytes read again, bounded as the index read them)."""
    if isinstance(config.annotations, RemoteRoot):
        return hashlib.sha256(config.annotations.read("", config.max_annotations_bytes)).hexdigest()
    return sha256_file(config.annotations)


def _write_table(out: Path, locations: list, rows: list[list], masks: bool, keypoints: bool,
                 record_sizes: list[int] | None) -> None:
    columns: dict[str, list | pa.Array] = {name: [] for name in ("key", "shard", "offset", "size")}
    for shard_index, samples in enumerate(locations):
        for components in samples:
            image = next(c for c in components if c.extension == "jpg")
            columns["key"].append(image.key)
            columns["shard"].append(shard_index)
            columns["offset"].append(image.offset)
            columns["size"].append(image.size)
    names = ("path", "width", "height", CHECKSUM_FIELD.name)  # no label: a sample's classes are its objects'
    for i, name in enumerate(names):
        columns[name] = [row[i] for row in rows]
    columns["image_id"] = pa.array([row[4] for row in rows], COLUMN_TYPES["image_id"])
    columns["boxes"] = pa.array([[v for box in row[5] for v in box] for row in rows], COLUMN_TYPES["boxes"])
    columns["labels"] = pa.array([row[6] for row in rows], COLUMN_TYPES["labels"])
    columns["iscrowd"] = pa.array([row[7] for row in rows], COLUMN_TYPES["iscrowd"])
    if masks:
        columns["masks"] = pa.array([[rle.encode("ascii") for rle in row[8]] for row in rows], COLUMN_TYPES["masks"])
    if keypoints:  # 3 x K values an object (x, y, visibility), flattened as boxes are
        columns["keypoints"] = pa.array([[v for point in row[9] for v in point] for row in rows],
                                        COLUMN_TYPES["keypoints"])
    if record_sizes is not None:  # a split conversion's part: what the merge replays (``shard_rule``)
        columns[RECORD_SIZE_FIELD.name] = record_sizes
    write_sample_table(out / SAMPLE_TABLE_NAME, columns)
