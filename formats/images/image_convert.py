"""``dataio convert images``: an ImageNet-layout folder to WebDataset shards (or Arrow, ``format="arrow"``).

Output, in OUT: ``shard-NNNNNN.tar`` (samples ``KEY.jpg``, ``KEY.cls``,
``KEY.json`` with the source path), ``shard-NNNNNN.idx`` (DALI index),
``samples.arrow`` (sample table), ``rejected.jsonl`` (one line per rejected
file or folder, with its reason, sorted by path) and ``manifest.json``,
written last. The source tree is walked by ``dataio.formats.images.image_tree``
(symlink loops, FIFOs, unreadable folders, names that are not UTF-8); paths
are stored as that module's ``escape_path`` writes them. Killed at any
point, the same command resumes from the last finished shard
(``dataio.formats.dataset.convert_journal``), with byte-identical output.

Images are prepared in ``num_workers`` processes with an ordered map, so the
output is byte-identical whatever the worker count.

With ``captions=True`` the source is image-text pairs (``caption_sources``: a folder of images with
sidecar ``NAME.txt`` captions, or Parquet with a caption column): each sample's members are ``KEY.jpg``,
``KEY.txt`` (the caption) and ``KEY.json`` (path and size), the table holds each caption and where its
``.json`` lies (``pair_fields``) and, with a ``tokenizer``, each caption's token ids (``caption_tokens``),
and there are no classes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from collections import deque
from itertools import islice
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from dataio.formats.bounded_read import FileTooLarge
from dataio.formats.dataset.arrow_image_shards import ArrowImageWriter, image_locations
from dataio.formats.images.class_names import read_class_names
from dataio.formats.progress import progress
from dataio.formats.errors import NothingConverted, UsageError
from dataio.formats.fallback_log import warn_once
from dataio.formats.images.image_prepare import (WITHOUT_CODEC, ImagePrepareConfig, PreparedImage, Rejection,
                                          add_restart_markers, prepare_image)
from dataio.formats.pairs.caption_sources import (CaptionInput, read_caption, scan_parquet_pairs, sidecar_of,
                                                   walk_caption_folder)
from dataio.formats.pairs.caption_tokens import caption_ids, checked_tokenizer, token_dtype_name
from dataio.formats.images.image_tree import NotRegularFile, errno_text, read_regular_file, source_path, walk_image_tree
from dataio.formats.images.skipped_folders import refuse_output_inside_source
from dataio.formats.dataset.convert_journal import Journal, JournalledShards, fingerprint
from dataio.formats.files import write_atomic
from dataio.formats.ranks.rank_merge import merge_if_complete
from dataio.formats.ranks.rank_split import rank_folder, rank_range
from dataio.formats.images.parquet_images import LocalFile, ParquetImages, parquet_files, scan_parquet_images
from dataio.formats.dataset.out_lock import locked_output
from dataio.formats.dataset.manifest import MANIFEST_NAME, SAMPLE_TABLE_NAME, Manifest, ShardEntry
from dataio.formats.pairs.pair_fields import MAX_CAPTION_BYTES, pair_fields
from dataio.formats.dataset.sample_fields import IMAGE_FIELDS, member_columns
from dataio.formats.dataset.sample_table import CHECKSUM_FIELD, sample_checksum, write_sample_table
from dataio.formats.sizes import parse_size
from dataio.formats.dataset.wds_shards import ShardWriter, scan_tar
from dataio.formats.text.tokenizer_setup import TokenizerConfig
from dataio.formats.worker_pool import ordered_map

REJECTED_NAME = "rejected.jsonl"
_OUTPUT_PATTERNS = ("shard-*.tar", "shard-*.idx", "shard-*.arrow", ".shard-*", MANIFEST_NAME, SAMPLE_TABLE_NAME, REJECTED_NAME)


@dataclass(frozen=True, kw_only=True)
class ConvertImagesConfig:
    """Everything ``dataio convert images`` takes."""

    src: Path
    out: Path
    format: str = "wds"  # "wds": WebDataset tars; "arrow": Arrow IPC streams in HF's image layout
    shard_size: int = 256 * 10**6
    max_shard_samples: int | None = None
    num_workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    strict: bool = False
    overwrite: bool = False
    progress: bool = True
    prepare: ImagePrepareConfig = field(default_factory=ImagePrepareConfig)
    rank: int = 0  # of a multi-node conversion: this process packs its share into OUT/rank-R-of-N
    world_size: int = 1
    image_column: str = "image"  # Parquet sources (the Hugging Face image layout)
    label_column: str = "label"
    classes_file: Path | None = None  # class names, one per line; default: folder names, or the Parquet metadata
    captions: bool = False  # image-text pairs: a caption folder, or Parquet's caption_column (caption_sources)
    caption_column: str = "caption"
    max_caption_bytes: int = MAX_CAPTION_BYTES  # a longer caption is rejected with its pair
    tokenizer: TokenizerConfig | None = None  # pairs: each caption's token ids stored too (caption_tokens)

    def __post_init__(self) -> None:
        object.__setattr__(self, "src", Path(self.src))
        object.__setattr__(self, "out", Path(self.out))
        object.__setattr__(self, "shard_size", parse_size(self.shard_size))
        if self.num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {self.num_workers}")
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank must be in 0..world_size-1 and world_size >= 1, got {self.rank} of {self.world_size}")
        if self.format not in ("wds", "arrow"):
            raise ValueError(f"format must be 'wds' or 'arrow', got {self.format!r}")
        if self.max_shard_samples is not None and self.max_shard_samples < 1:
            raise ValueError("max_shard_samples must be >= 1")
        if not self.captions and self.tokenizer is not None:
            raise ValueError("tokenizer is for image-text pairs: give captions=True (--captions) too")
        if self.captions and self.classes_file is not None:
            raise ValueError("classes_file is for classes; image-text pairs have captions instead")
        if self.captions and self.format != "wds":
            raise ValueError("image-text pairs are packed as WebDataset tars (format 'wds')")
        if self.tokenizer is not None and self.tokenizer.train and self.world_size > 1:
            raise ValueError("a tokenizer trained by each rank would differ: give every rank one tokenizer file "
                             "(--tokenizer FILE)")
        if self.max_caption_bytes < 1:
            raise ValueError(f"max_caption_bytes must be >= 1, got {self.max_caption_bytes}")


@dataclass(frozen=True)
class ConvertSummary:
    """What a conversion did."""

    num_samples: int
    num_rejected: int
    num_converted: int
    num_shards: int
    out: Path
    rejected: tuple[dict[str, str], ...]
    pairs: bool = False

    def line(self) -> str:
        return (
            f"packed {self.num_samples} {'image-text pairs' if self.pairs else 'images'} into {self.num_shards} "
            f"shards in {self.out} "
            f"({self.num_converted} re-encoded, {self.num_rejected} rejected"
            + (f", listed in {self.out / REJECTED_NAME})" if self.num_rejected else ")")
        )


# "<_io.BytesIO object at 0x7f...>" in a decoder's message: a different address on every run.
_OBJECT_REPR = re.compile(r" ?<[^<>]* object at 0x[0-9a-fA-F]+>")


def _prepare_job(job: tuple[str | None, str | bytes | LocalFile | Rejection, ImagePrepareConfig, CaptionInput | None]
                 ) -> PreparedImage | Rejection:
    """In a worker: a source file (``src`` and its relative path), image bytes or the file a Parquet row names
    (``src`` None), prepared; an image-text pair's caption read and checked first."""
    src, item, config, caption = job
    if isinstance(item, Rejection):
        return item
    if caption is not None:
        text = read_caption(src, caption)
        if isinstance(text, tuple):
            return Rejection(text[0])
        result = _prepare_job((src, item, config, None))
        return result if isinstance(result, Rejection) else replace(result, caption=text)
    if src is None and not isinstance(item, LocalFile):
        data = item
        if len(data) > config.max_file_size:  # a Parquet row's bytes, held to the limit of a file's
            return Rejection(f"image too large: {len(data):,} bytes (limit {config.max_file_size:,})")
    else:
        try:
            data = read_regular_file(item.path if isinstance(item, LocalFile) else source_path(src, item),
                                     config.max_file_size)
        except (NotRegularFile, FileTooLarge) as e:
            return Rejection(str(e) if src is not None else f"{item.path}: {e}")
        except OSError as e:
            return Rejection(f"cannot read: {errno_text(e)}" if src is not None
                             else f"cannot read {item.path}: {errno_text(e)}")
    result = prepare_image(data, config)
    if isinstance(result, Rejection):
        return Rejection(_OBJECT_REPR.sub("", result.reason))  # rejected.jsonl: the same bytes on every run
    return result


def _prepare_chunk(jobs: list) -> list[PreparedImage | Rejection]:
    return [_prepare_job(job) for job in jobs]


def _jobs(config: ConvertImagesConfig, inputs: "_Inputs", start: int) -> Iterator[tuple[str, tuple]]:
    """``(path stored in the table, job)`` for inputs ``start`` on: files are read by the workers, Parquet rows
    are streamed here (one record batch at a time) and their bytes sent along (or the file a path-only row
    names, read by the workers)."""
    limit = config.max_caption_bytes
    if inputs.parquet is None:
        for relative, _ in inputs.files[start:]:
            caption = CaptionInput(sidecar=sidecar_of(relative), limit=limit) if config.captions else None
            yield relative, (str(config.src), relative, config.prepare, caption)
        return
    count = len(inputs.files) - start
    for row in islice(inputs.parquet.stream(inputs.first + start), count):
        item: bytes | LocalFile | Rejection = row.data if row.data else Rejection(row.missing)
        if row.damaged:
            item = Rejection(row.damaged)
        elif config.captions:
            pass  # no label: the caption is checked with the image
        elif row.label is None:
            item = Rejection("no label in the row")
        elif not 0 <= row.label < len(inputs.classes):
            item = Rejection(f"label {row.label} is not in 0..{len(inputs.classes) - 1}")
        caption = CaptionInput(value=row.value, limit=limit) if config.captions else None
        yield row.path, (None, item, config.prepare, caption)


def _prepared(config: ConvertImagesConfig, jobs: Iterator[tuple[str, tuple]]) -> Iterator[tuple[str, PreparedImage | Rejection]]:
    """``(path, prepared image or rejection)`` in input order, from ``num_workers`` processes
    (``worker_pool.ordered_map``, which takes the jobs lazily: Parquet bytes are streamed, not held).

    A worker that dies (OOM kill, decoder crash) raises WorkerDied, never hangs; Ctrl-C stops the workers at once.
    """
    paths: deque[str] = deque()  # the paths of the jobs taken, in order: results come back in that order

    def taken() -> Iterator[tuple]:
        for path, job in jobs:
            paths.append(path)
            yield job

    for result in ordered_map(_prepare_job, taken(), config.num_workers, what="convert"):
        yield paths.popleft(), result


@dataclass(frozen=True)
class _Inputs:
    """What one conversion packs: ``(id, label)`` per input (a relative path, or ``FILE#ROW`` of a Parquet
    source) and where the bytes come from."""

    classes: list[str]
    files: list[tuple[str, int]]
    rejected: list[tuple[str, str]]  # found before reading (by the walk)
    parquet: ParquetImages | None = None
    first: int = 0  # the Parquet source's row of files[0]

    def part(self, start: int, stop: int, with_rejected: bool) -> "_Inputs":
        return replace(self, files=self.files[start:stop], rejected=self.rejected if with_rejected else [],
                       first=self.first + start)


def _inputs(config: ConvertImagesConfig) -> tuple[_Inputs, np.ndarray | None]:
    """The conversion's inputs, and (for a multi-node conversion) each input's size in bytes."""
    files = parquet_files(config.src)
    if files is not None and config.captions:
        source = scan_parquet_pairs(files, image_column=config.image_column, caption_column=config.caption_column)
    elif files is not None:
        source = scan_parquet_images(files, image_column=config.image_column, label_column=config.label_column,
                                     classes_file=config.classes_file)
    if files is not None:
        inputs = _Inputs(list(source.classes), list(source.rows), [], source)
        return inputs, source.row_sizes() if config.world_size > 1 else None
    refuse_output_inside_source(config.src, config.out)
    tree = walk_caption_folder(config.src) if config.captions else walk_image_tree(config.src)
    classes = list(read_class_names(config.classes_file)) if config.classes_file else tree.classes
    if len(classes) != len(tree.classes):
        raise UsageError(f"classes file {config.classes_file} names {len(classes)} classes, "
                         f"{config.src} has {len(tree.classes)} class folders")
    inputs = _Inputs(classes, tree.files, tree.rejected)
    if config.world_size == 1:
        return inputs, None
    return inputs, np.array([os.stat(source_path(config.src, relative)).st_size for relative, _ in tree.files],
                            dtype=np.int64)


def convert_images(config: ConvertImagesConfig) -> ConvertSummary:
    """Pack ``config.src`` into shards in ``config.out``; resumes an interrupted run (see ``convert_journal``).

    With ``world_size`` > 1, only this rank's share of the files (``rank_split``), into
    ``OUT/rank-R-of-N``; the last rank to finish merges the ranks' outputs (``rank_merge``).
    """
    checked_tokenizer(config.tokenizer)  # a bad tokenizer file is named before anything is read or written
    inputs, sizes = _inputs(config)
    if config.world_size == 1:
        summary = _pack(config, inputs)
        if summary.num_samples == 0:  # a rank with no share is fine; a whole conversion of nothing is not
            raise NothingConverted(
                f"no image converted from {config.src}: " + (
                    f"all {summary.num_rejected} {'rows' if inputs.parquet else 'files'} were rejected "
                    f"(listed in {config.out / REJECTED_NAME})" if summary.num_rejected else "it holds no images"))
        return summary
    start, stop = rank_range(sizes, config.rank, config.world_size)
    part = replace(config, out=config.out / rank_folder(config.rank, config.world_size), rank=0, world_size=1)
    part.out.mkdir(parents=True, exist_ok=True)
    # what the walk rejected (loops, unreadable folders) is listed once, by rank 0
    summary = _pack(part, inputs.part(start, stop, with_rejected=config.rank == 0))
    merge_if_complete(config.out)
    return summary


def _pack(config: ConvertImagesConfig, inputs: _Inputs) -> ConvertSummary:
    """The conversion of ``inputs`` into ``config.out``, holding its lock."""
    with locked_output(config.out):
        return _pack_locked(config, inputs)


def _pack_locked(config: ConvertImagesConfig, inputs: _Inputs) -> ConvertSummary:
    classes, files = inputs.classes, inputs.files
    if add_restart_markers is None:  # said here, in the parent: the workers would each say it
        warn_once("jpeg-codec-pack", WITHOUT_CODEC)
    options = {"sample_checksum": CHECKSUM_FIELD.name, "max_side": config.prepare.max_side, "quality": config.prepare.quality,
               "max_pixels": config.prepare.max_pixels, "max_file_size": config.prepare.max_file_size,
               "shard_size": config.shard_size,
               "restart_interval": config.prepare.restart_interval if add_restart_markers else 0,
               **({"format": "arrow"} if config.format == "arrow" else {}),
               **({"captions": config.caption_column if inputs.parquet else "sidecar",
                   "max_caption_bytes": config.max_caption_bytes} if config.captions else {})}
    journal = Journal(config.out, fingerprint({**options, "max_shard_samples": config.max_shard_samples,
                                               "classes": classes}, files))
    shards_log = JournalledShards(journal, journal.start(config.out, config.overwrite, _OUTPUT_PATTERNS))
    done, start = shards_log.done, shards_log.start
    accepted = [tuple(row) for record in done for row in record.rows]  # (path, label, width, height, xxh3)
    if config.format == "arrow":
        writer = ArrowImageWriter(config.out, config.shard_size, config.max_shard_samples, first_index=len(done),
                                  classes=tuple(classes))
    else:
        writer = ShardWriter(config.out, config.shard_size, config.max_shard_samples, first_index=len(done))
    bar = progress(total=len(files), initial=start, unit="img", desc="convert", enabled=config.progress)
    try:
        with writer:
            for position, ((identity, label), (relative, result)) in enumerate(
                    zip(files[start:], _prepared(config, _jobs(config, inputs, start))), start):
                bar.update()
                pending = shards_log.pending
                if isinstance(result, Rejection):
                    pending.rejected.append({"path": identity, "reason": result.reason})
                    continue
                key = f"{len(accepted):09d}"
                meta = {"path": relative, "label": label, "width": result.width, "height": result.height}
                text = {"cls": str(label)}
                if result.caption is not None:  # an image-text pair: its caption instead of a label
                    meta.pop("label")
                    text = {"txt": result.caption}
                entry = writer.write({"__key__": key, "jpg": result.jpeg, **text, "json": json.dumps(meta)})
                if entry is not None:
                    shards_log.finished(writer.next_index - 1, entry, position)
                    pending = shards_log.pending  # the closed shard's successor: this sample's
                row = (relative, label, result.width, result.height, sample_checksum(result.jpeg))
                row += (result.caption,) if result.caption is not None else ()
                accepted.append(row)
                pending.rows.append(list(row))
                pending.converted += result.converted
            entry = writer.close()
            if entry is not None:
                shards_log.finished(writer.next_index - 1, entry, len(files))
    finally:
        bar.close()
    shards_log.close()  # files after the last shard: rejected ones only
    rejected = shards_log.rejected(inputs.rejected)
    converted = shards_log.converted()
    shards = [ShardEntry(**record.entry) for record in done] + writer.entries
    locate = image_locations if config.format == "arrow" else scan_tar
    locations = [locate(config.out / e.file) for e in shards[:len(done)]] + writer.locations
    fields = IMAGE_FIELDS
    columns = _table_columns(locations, accepted, config.captions)
    if config.captions:
        token_dtype = None
        if config.tokenizer is not None:
            columns["input_ids"], options["tokenizer"] = caption_ids(columns["caption"], config.tokenizer, config.out)
            token_dtype = token_dtype_name(options["tokenizer"])
        fields = pair_fields("jpeg", token_dtype)
    write_sample_table(config.out / SAMPLE_TABLE_NAME, columns)
    lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rejected)
    write_atomic(config.out / REJECTED_NAME, lines.encode())
    Manifest(kind="images", num_samples=len(accepted), shards=tuple(shards), classes=tuple(classes),
             num_rejected=len(rejected), options=options, fields=fields).write(config.out)
    journal.finish()
    return ConvertSummary(len(accepted), len(rejected), converted, len(shards), config.out, tuple(rejected),
                          config.captions)


def _table_columns(locations: list, accepted: list[tuple], captions: bool) -> dict[str, list]:
    """The sample table's columns: where each image (and a pair's ``.json``) lies, then the accepted rows'
    ``(path, label, width, height, xxh3[, caption])``."""
    meta_offset, meta_size = member_columns("json")
    columns: dict[str, list] = {name: [] for name in ("key", "shard", "offset", "size")
                                + ((meta_offset, meta_size) if captions else ())}
    for shard_index, samples in enumerate(locations):
        for components in samples:
            image = next(c for c in components if c.extension == "jpg")
            columns["key"].append(image.key)
            columns["shard"].append(shard_index)
            columns["offset"].append(image.offset)
            columns["size"].append(image.size)
            if captions:
                meta = next(c for c in components if c.extension == "json")
                columns[meta_offset].append(meta.offset)
                columns[meta_size].append(meta.size)
    names = ("path", "label", "width", "height", CHECKSUM_FIELD.name) + (("caption",) if captions else ())
    for name, values in zip(names, zip(*accepted) if accepted else ([],) * len(names)):
        columns[name] = list(values)
    return columns
