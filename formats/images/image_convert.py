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

This is the engine of every kind of sample packed from images; what differs by kind (``kind``: classification,
the default; ``pairs``, which ``captions=True`` asks for; ``views``) is the kind's packing
(``packing_kind``, found by name in ``dataio.formats.kinds``): which files or rows are inputs and their classes,
what each input reads beside its image in the worker (a pair's caption), the members, ``.json`` metadata and
table columns of a sample, and the options and last columns (a pair's token ids) of the manifest, which declares
the kind (``sample_kind``) and the fields its ``fields`` part reads off those options.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from collections import Counter, deque
from itertools import islice
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from dataio.formats.file_gate import FileRefused
from dataio.formats.dataset.arrow_image_shards import ArrowImageWriter, image_locations
from dataio.formats.progress import progress
from dataio.formats.errors import DataioError, NothingConverted
from dataio.formats.fallback_log import warn_once
from dataio.formats.images.image_prepare import (WITHOUT_CODEC, ImagePrepareConfig, PreparedImage, Rejection,
                                          add_restart_markers, prepare_image)
from dataio.formats.images.image_tree import errno_text, read_regular_file
from dataio.formats.images.source_reads import read_source_file, source_of
from dataio.formats.images.image_inputs import ImageInputs, list_inputs
from dataio.formats.remote.source_files import RemoteRoot, SourceUnreadable
from dataio.formats.remote.storage import is_remote
from dataio.formats.images.packing_kind import ConvertKind, asked_kind, convert_kind
from dataio.formats.dataset.convert_journal import Journal, JournalledShards, fingerprint
from dataio.formats.files import write_atomic
from dataio.formats.kinds import kind_named
from dataio.formats.limits import MAX_CAPTION_BYTES
from dataio.formats.ranks.rank_merge import merge_if_complete
from dataio.formats.ranks.rank_split import rank_folder, rank_range
from dataio.formats.images.parquet_images import LocalFile, ParquetImages
from dataio.formats.dataset.out_lock import locked_output
from dataio.formats.dataset.manifest import MANIFEST_NAME, SAMPLE_TABLE_NAME, Manifest, ShardEntry, version_for
from dataio.formats.dataset.sample_fields import member_columns
from dataio.formats.dataset.sample_table import CHECKSUM_FIELD, RECORD_SIZE_FIELD, sample_checksum, write_sample_table
from dataio.formats.sizes import parse_size
from dataio.formats.dataset.wds_shards import ShardWriter, scan_tar
from dataio.formats.text.tokenizer_setup import TokenizerConfig
from dataio.formats.worker_pool import ordered_map

REJECTED_NAME = "rejected.jsonl"
# What the journal and the table are made from, per accepted input (then its kind's ``extra``: a pair's caption).
ROW = ("path", "label", "width", "height", CHECKSUM_FIELD.name)
_OUTPUT_PATTERNS = ("shard-*.tar", "shard-*.idx", "shard-*.arrow", ".shard-*", MANIFEST_NAME, SAMPLE_TABLE_NAME, REJECTED_NAME)


@dataclass(frozen=True, kw_only=True)
class ConvertImagesConfig:
    """Everything ``dataio convert images`` takes."""

    src: Path | str  # a folder or Parquet files; a URL (s3://...) is read through the storage layer
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
    kind: str = ""  # the kind of sample packed: "classification" (the default), "pairs" or "views"
    captions: bool = False  # kind "pairs", image-text pairs: a caption folder, or Parquet's caption_column
    caption_column: str = "caption"
    max_caption_bytes: int = MAX_CAPTION_BYTES  # a longer caption is rejected with its pair
    tokenizer: TokenizerConfig | None = None  # pairs: each caption's token ids stored too (caption_tokens)
    storage_options: dict | None = field(default=None, repr=False)  # a URL source's backend options (secrets)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", asked_kind(self.kind, self.captions) or "classification")
        object.__setattr__(self, "src", self.src if is_remote(self.src) else Path(self.src))
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
        if self.max_caption_bytes < 1:
            raise ValueError(f"max_caption_bytes must be >= 1, got {self.max_caption_bytes}")
        convert_kind(self.kind).check(self)  # the options its kind does not take


@dataclass(frozen=True)
class ConvertSummary:
    """What a conversion did."""

    num_samples: int
    num_rejected: int
    num_converted: int
    num_shards: int
    out: Path
    rejected: tuple[dict[str, str], ...]
    what: str = "images"  # the samples, as the kind names them ("image-text pairs")

    def line(self) -> str:
        return (
            f"packed {self.num_samples} {self.what} into {self.num_shards} shards in {self.out} "
            f"({self.num_converted} re-encoded, {self.num_rejected} rejected"
            + (f", listed in {self.out / REJECTED_NAME})" if self.num_rejected else ")")
        )


# "<_io.BytesIO object at 0x7f...>" in a decoder's message: a different address on every run.
_OBJECT_REPR = re.compile(r" ?<[^<>]* object at 0x[0-9a-fA-F]+>")


def _prepare_job(job: tuple) -> PreparedImage | Rejection:
    """In a worker: ``(src, item, config, beside)``: a source file (``src`` and its relative path), image bytes or
    the file a Parquet row names (``src`` None), prepared; what its kind reads beside it (``packing_kind.Beside``:
    a pair's caption) read and checked first."""
    src, item, config, beside = job
    if isinstance(item, Rejection):
        return item
    value = beside.read(src)
    if isinstance(value, Rejection):
        return value
    if src is None and not isinstance(item, LocalFile):
        data = item
        if len(data) > config.max_file_size:  # a Parquet row's bytes, held to the limit of a file's
            return Rejection(f"image too large: {len(data):,} bytes (limit {config.max_file_size:,})")
    else:
        try:
            data = (read_regular_file(item.path, config.max_file_size) if isinstance(item, LocalFile) else
                    read_source_file(src, item, config.max_file_size))  # regular files only; a link may leave:
            # an image is decoded and checked before it is packed, and subsets linked into a shared store (and the
            # Hugging Face cache's snapshots/ -> blobs/) are how clusters hold images; text sidecars stay in the tree
        except FileRefused as e:
            return Rejection(str(e) if src is not None else f"{item.path}: {e}")
        except OSError as e:
            return Rejection(f"cannot read: {errno_text(e)}" if src is not None
                             else f"cannot read {item.path}: {errno_text(e)}")
        except SourceUnreadable as e:  # a remote object's storage failed past its retries: the input's one line
            return Rejection(str(e))
    result = prepare_image(data, config)
    if isinstance(result, Rejection):
        return Rejection(_OBJECT_REPR.sub("", result.reason))  # rejected.jsonl: the same bytes on every run
    return replace(result, beside=value)


def _prepare_chunk(jobs: list) -> list[PreparedImage | Rejection]:
    return [_prepare_job(job) for job in jobs]


def _jobs(config: ConvertImagesConfig, kind: ConvertKind, inputs: ImageInputs, start: int
          ) -> Iterator[tuple[str, tuple]]:
    """``(path stored in the table, job)`` for inputs ``start`` on: files are read by the workers, Parquet rows
    are streamed here (one record batch at a time) and their bytes sent along (or the file a path-only row
    names, read by the workers)."""
    if inputs.parquet is None:
        root = source_of(config)  # a local folder's path, or a URL's RemoteRoot (opened once per worker)
        src = root if isinstance(root, RemoteRoot) else str(root)
        for relative, _ in inputs.files[start:]:
            yield relative, (src, relative, config.prepare, kind.file_beside(config, relative))
        return
    count = len(inputs.files) - start
    for row in islice(inputs.parquet.stream(inputs.first + start), count):
        item: bytes | LocalFile | Rejection = row.data if row.data else Rejection(row.missing)
        problem = row.damaged or kind.row_problem(row, inputs.classes)  # a label outside the classes...
        if problem:
            item = Rejection(problem)
        yield row.path, (None, item, config.prepare, kind.row_beside(config, row))


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


def convert_images(config: ConvertImagesConfig) -> ConvertSummary:
    """Pack ``config.src`` into shards in ``config.out``; resumes an interrupted run (see ``convert_journal``).

    With ``world_size`` > 1, only this rank's share of the files (``rank_split``), into
    ``OUT/rank-R-of-N``; the last rank to finish merges the ranks' outputs (``rank_merge``).
    """
    kind = convert_kind(config.kind)
    kind.start(config)  # what is checked before anything is read or written (a pair's tokenizer file)
    inputs, sizes = list_inputs(config, kind, sized=config.world_size > 1)
    if config.world_size == 1:
        summary = _pack(config, kind, inputs)
        if summary.num_samples == 0:  # a rank with no share is fine; a whole conversion of nothing is not
            raise NothingConverted(
                f"no image converted from {config.src}: " + (
                    f"all {summary.num_rejected} {'rows' if inputs.parquet else 'files'} were rejected "
                    f"(listed in {config.out / REJECTED_NAME})" if summary.num_rejected else "it holds no images"))
        return summary
    start, stop = rank_range(sizes, config.rank, config.world_size)
    # what the walk rejected (loops, unreadable folders) is listed once, by rank 0
    summary = pack_image_piece(config, inputs.part(start, stop, with_rejected=config.rank == 0),
                               config.out / rank_folder(config.rank, config.world_size))
    merge_if_complete(config.out)
    return summary


def pack_image_piece(config: ConvertImagesConfig, piece: ImageInputs, out: Path) -> ConvertSummary:
    """A rank's share or a plan's item packed into its part folder ``out`` (journal, resume, manifest of its own)."""
    kind = convert_kind(config.kind)
    kind.start(config)
    part = replace(config, out=out, rank=0, world_size=1)
    part.out.mkdir(parents=True, exist_ok=True)
    return _pack(part, kind, piece, sized=True)


def _pack(config: ConvertImagesConfig, kind: ConvertKind, inputs: ImageInputs, sized: bool = False) -> ConvertSummary:
    """The conversion of ``inputs`` into ``config.out``, holding its lock; ``sized``: a split conversion's part,
    whose table keeps each sample's size in the shard rule (the merge's ``order_shard``)."""
    with locked_output(config.out):
        return _pack_locked(config, kind, inputs, sized)


def _options(config: ConvertImagesConfig, kind: ConvertKind, inputs: ImageInputs) -> dict:
    """The manifest's options: how the images were prepared and sharded, and what the kind adds."""
    return {"sample_checksum": CHECKSUM_FIELD.name, "max_side": config.prepare.max_side,
            "quality": config.prepare.quality, "max_pixels": config.prepare.max_pixels,
            "max_file_size": config.prepare.max_file_size, "shard_size": config.shard_size,
            **({"max_shard_samples": config.max_shard_samples} if config.max_shard_samples else {}),
            "restart_interval": config.prepare.restart_interval if add_restart_markers else 0,
            **({"format": "arrow"} if config.format == "arrow" else {}),
            **kind.options(config, inputs.parquet is not None)}


def _pack_locked(config: ConvertImagesConfig, kind: ConvertKind, inputs: ImageInputs, sized: bool) -> ConvertSummary:
    classes, files = inputs.classes, inputs.files
    if add_restart_markers is None:  # said here, in the parent: the workers would each say it
        warn_once("jpeg-codec-pack", WITHOUT_CODEC)
    options = _options(config, kind, inputs)
    journal = Journal(config.out, fingerprint({**options, "max_shard_samples": config.max_shard_samples,
                                               "classes": classes}, files))
    shards_log = JournalledShards(journal, journal.start(config.out, config.overwrite, _OUTPUT_PATTERNS))
    done, start = shards_log.done, shards_log.start
    accepted = [tuple(row) for record in done for row in record.rows]  # ROW, then the kind's extra
    record_sizes = [size for record in done for size in record.sizes]
    if config.format == "arrow":
        writer = ArrowImageWriter(config.out, config.shard_size, config.max_shard_samples, first_index=len(done),
                                  classes=tuple(classes))
    else:
        writer = ShardWriter(config.out, config.shard_size, config.max_shard_samples, first_index=len(done))
    bar = progress(total=len(files), initial=start, unit="img", desc="convert", enabled=config.progress)
    try:
        with writer:
            for position, ((identity, label), (relative, result)) in enumerate(
                    zip(files[start:], _prepared(config, _jobs(config, kind, inputs, start)), strict=True), start):
                bar.update()
                pending = shards_log.pending
                if isinstance(result, Rejection):
                    pending.rejected.append({"path": identity, "reason": result.reason})
                    continue
                sample = kind.sample(relative, label, result)
                key = f"{inputs.first + len(accepted):09d}"  # a part's from its first input's place: unique merged
                entry = writer.write({"__key__": key, "jpg": result.jpeg, **sample.members, "json": json.dumps(sample.meta)})
                if entry is not None:
                    shards_log.finished(writer.next_index - 1, entry, position)
                    pending = shards_log.pending  # the closed shard's successor: this sample's
                row = (relative, label, result.width, result.height, sample_checksum(result.jpeg), *sample.extra)
                accepted.append(row)
                pending.rows.append(list(row))
                record_sizes.append(writer.record_sizes[-1])
                pending.sizes.append(writer.record_sizes[-1])
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
    columns = _table_columns(locations, accepted, kind)
    if sized:
        columns[RECORD_SIZE_FIELD.name] = record_sizes
    before = set(columns)
    failed = kind.finish(columns, options, config.tokenizer, config.out)  # last columns: a pair's token ids
    if failed:  # a user's tokenizer failed on these captions: their pairs rejected, one line each (as index's)
        accepted, shards = _without(failed, columns, before, accepted, shards, rejected)
        columns.pop(RECORD_SIZE_FIELD.name, None)  # the dropped rows' members stay in the shards: no replay
        if not accepted:
            raise NothingConverted(f"nothing converted from {config.src}: the tokenizer failed on every caption "
                                   f"({rejected[-1]['path']}: {rejected[-1]['reason']})")
    write_sample_table(config.out / SAMPLE_TABLE_NAME, columns)
    lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rejected)
    write_atomic(config.out / REJECTED_NAME, lines.encode())
    fields = kind_named(kind.name).part("fields")(options)
    Manifest(kind="images", num_samples=len(accepted), shards=tuple(shards), classes=tuple(classes),
             num_rejected=len(rejected), options=options, fields=fields, sample_kind=kind.name,
             version=version_for("images", fields)).write(config.out)
    journal.finish()
    return ConvertSummary(len(accepted), len(rejected), converted, len(shards), config.out, tuple(rejected),
                          kind.what)


def _without(failed: dict[int, str], columns: dict[str, list], before: set[str], accepted: list[tuple],
             shards: list[ShardEntry], rejected: list[dict]) -> tuple[list[tuple], list[ShardEntry]]:
    """The ``failed`` rows out of the table (their members stay in the shards, counted as skipped there, as
    ``dataio index`` leaves a tar's members no kind reads), each a rejected line; the shard entries recounted."""
    rejected.extend({"path": accepted[row][0], "reason": reason} for row, reason in sorted(failed.items()))
    keep = [row not in failed for row in range(len(accepted))]
    for name in before:
        columns[name] = [value for value, kept in zip(columns[name], keep, strict=True) if kept]
    counts = Counter(columns["shard"])
    return ([row for row, kept in zip(accepted, keep, strict=True) if kept],
            [replace(e, num_samples=counts[i], num_skipped=e.num_skipped + e.num_samples - counts[i])
             for i, e in enumerate(shards)])


def _table_columns(locations: list, accepted: list[tuple], kind: ConvertKind) -> dict[str, list]:
    """The sample table's columns: where each image (and each member the kind locates: a pair's ``.json``) lies,
    then the accepted rows' path, size and checksum, and the kind's columns of them (a class's label, a pair's
    caption)."""
    located = {name: member_columns(name) for name in kind.located}
    columns: dict[str, list] = {name: [] for name in ("key", "shard", "offset", "size")}
    columns.update({column: [] for pair in located.values() for column in pair})
    for shard_index, samples in enumerate(locations):
        for components in samples:
            image = next(c for c in components if c.extension == "jpg")
            columns["key"].append(image.key)
            columns["shard"].append(shard_index)
            columns["offset"].append(image.offset)
            columns["size"].append(image.size)
            for name, (offset, size) in located.items():
                member = next(c for c in components if c.extension == name)
                columns[offset].append(member.offset)
                columns[size].append(member.size)
    names = (*ROW, *kind.extra)
    rows = dict(zip(names, zip(*accepted, strict=True) if accepted else ([],) * len(names), strict=True))
    for name in ("path", "width", "height", CHECKSUM_FIELD.name, *kind.columns):
        columns[name] = list(rows[name])
    return columns
