"""``dataio merge OUT``: the ranks' outputs of a multi-node conversion as one dataset.

Rank r of N writes a complete dataset of its own into ``OUT/rank-0000r-of-0000N/`` (its own journal,
resume and manifest). The merge writes ``OUT/samples.arrow`` (images), ``OUT/tokenizer.json`` (text),
the rejected list and, last, ``OUT/manifest.json``, whose shard entries point into the rank folders:
no shard is copied or renamed. Since the ranks pack contiguous ranges of the input in order
(``rank_split``), the merged dataset holds the samples of a one-process conversion in the same order.

The last rank to finish merges (``merge_if_complete``); a lock file serialises ranks that finish
together, and every write is atomic and deterministic, so a merge run twice writes the same bytes.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from dataio.formats.errors import DataioError, ShardError, UsageError
from dataio.formats.files import write_atomic
from dataio.formats.dataset.manifest import MANIFEST_NAME, SAMPLE_TABLE_NAME, Manifest, check_shard_file, read_manifest
from dataio.formats.dataset.arrow_image_shards import ArrowImageWriter
from dataio.formats.dataset.sample_table import ORDER_SHARD_FIELD, RECORD_SIZE_FIELD, read_sample_table
from dataio.formats.dataset.shard_rule import replay_shards
from dataio.formats.dataset.wds_shards import ShardWriter
from dataio.formats.limits import REPORT_EXAMPLES
from dataio.formats.limits import MAX_STATE_FILE_BYTES
from dataio.formats.file_gate import atomic_writer, open_lock, read_input

RANK_FOLDER = re.compile(r"rank-(\d{5})-of-(\d{5})")
MERGE_LOCK = ".merge.lock"
ORDER_SHARD_TOKENS = "order_shard_tokens"  # a merged text folder's: the shuffle's shards (``TokenShards``)
_COUNTS = ("num_documents", "num_tokens", "split_documents")  # text options that are sums over ranks


def rank_folders(out: Path) -> tuple[int, list[Path]]:
    """(world size, the rank folders in rank order); UsageError if there are none or they disagree."""
    if not out.is_dir():
        raise UsageError(f"{out} is not a folder (give the OUT of convert --rank R --world-size N)")
    found = sorted((int(m[1]), int(m[2]), p) for p in out.iterdir() if (m := RANK_FOLDER.fullmatch(p.name)))
    if not found:
        raise UsageError(f"{out}: no rank-NNNNN-of-NNNNN folders (written by convert --rank R --world-size N)")
    sizes = {world for _, world, _ in found}
    if len(sizes) != 1:
        raise UsageError(f"{out}: rank folders of several world sizes ({sorted(sizes)}); remove the stale ones")
    return sizes.pop(), [p for _, _, p in found]


def _finished(out: Path) -> tuple[int, list[Path], list[int]]:
    world, folders = rank_folders(out)
    done = {int(RANK_FOLDER.fullmatch(f.name)[1]) for f in folders if (f / MANIFEST_NAME).is_file()}
    return world, folders, [r for r in range(world) if r not in done]


def merge_ranks(out: str | Path, *, verify: bool = False, shards_here: bool = True) -> Manifest:
    """Merge the finished ranks of ``out``; DataioError naming the ranks that have not finished, or the files
    of a finished rank that are missing or changed since (with ``verify``: every shard's sha256 too).
    ``shards_here`` False: ``out`` mirrors the parts' small files only, their shards checked where they are
    (``plan_merge`` for a URL OUT).

    ``OUT/manifest.json`` is written last and only for a complete dataset.
    """
    out = Path(out)
    world, folders, missing = _finished(out)
    if missing:
        raise DataioError(f"{out}: rank(s) {', '.join(map(str, missing))} of {world} have not finished "
                          f"(no {RANK_FOLDER.pattern.split('(')[0]}NNNNN-of-{world:05d}/{MANIFEST_NAME}); rerun them")
    parts = [read_manifest(folder)[1] for folder in folders]
    if shards_here:
        _check_rank_files(out, folders, parts, verify)
    first = parts[0]
    for folder, part in zip(folders, parts, strict=True):
        if (part.kind != first.kind or part.sample_kind != first.sample_kind or part.classes != first.classes
                or part.fields != first.fields or _identity(part) != _identity(first)):
            raise DataioError(f"{folder}: converted with other options or classes than {folders[0].name}")
    shards = tuple(replace(s, file=f"{f.name}/{s.file}", index=f"{f.name}/{s.index}" if s.index else "")
                   for f, part in zip(folders, parts, strict=True) for s in part.shards)
    if first.kind == "images":
        options = dict(first.options)
        _merge_tables(out, folders, parts)
        _merge_lines(out, folders, "rejected.jsonl")
        if "tokenizer" in options:  # image-text pairs with their captions' token ids
            _merge_tokenizer(out, folders, parts)
    else:
        options = _merge_text(out, folders, parts)
    options["ranks"] = world
    manifest = Manifest(kind=first.kind, num_samples=sum(p.num_samples for p in parts), shards=shards,
                        classes=first.classes, num_rejected=sum(p.num_rejected for p in parts),
                        sample_table=SAMPLE_TABLE_NAME if first.kind == "images" else "", options=options,
                        fields=first.fields, sample_kind=first.sample_kind, version=first.version)
    manifest.write(out)
    return manifest


def _check_rank_files(out: Path, folders: list[Path], parts: list[Manifest], verify: bool) -> None:
    """Every shard (size as recorded; sha256 with ``verify``), index and table each rank's manifest names."""
    problems: list[tuple[int, str]] = []
    for rank, (folder, part) in enumerate(zip(folders, parts, strict=True)):
        for entry in part.shards:
            try:
                check_shard_file(folder / entry.file, entry, verify_checksum=verify)
            except ShardError as e:
                problems.append((rank, f"{folder.name}/{entry.file} {e.reason}"))
            if entry.index and not (folder / entry.index).is_file():
                problems.append((rank, f"{folder.name}/{entry.index} missing"))
        if part.sample_table and not (folder / part.sample_table).is_file():
            problems.append((rank, f"{folder.name}/{part.sample_table} missing"))
    if problems:
        ranks = sorted({rank for rank, _ in problems})
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise DataioError(f"{out}: not merged, rank(s) {', '.join(map(str, ranks))} changed since they finished: "
                          f"{problems[0][1]}{more}; convert those ranks again (remove their folders first)")


def merge_if_complete(out: Path) -> Manifest | None:
    """Merge if every rank has finished (the last rank to finish does it); None otherwise."""
    lock = open_lock(out / MERGE_LOCK, "its merge lock")  # the gate: a link there is refused, never followed
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # ranks finishing together merge one after the other
        _, _, missing = _finished(out)
        return None if missing else merge_ranks(out)
    finally:
        os.close(lock)


def _identity(manifest: Manifest) -> str:
    """The options that must agree across ranks (counts and per-rank totals excluded)."""
    options = {k: v for k, v in manifest.options.items()
               if k not in (*_COUNTS, "skipped", "length_histogram", "tokenizer")}  # tokenizers: checked apart
    return json.dumps(options, sort_keys=True)


def _merge_tables(out: Path, folders: list[Path], parts: list[Manifest]) -> None:
    """The ranks' tables one after the other into one file (shard numbers offset): one rank's table in memory
    at a time, so a merge of any number of samples needs the memory of its largest part. Where every part kept
    its samples' record sizes, they go and each sample's one-process shard (``order_shard``) comes instead."""
    order = _order_shards(folders, parts)
    base, writer, schema, first_row = 0, None, None, 0
    with atomic_writer(out / SAMPLE_TABLE_NAME) as sink:
        try:
            for folder, part in zip(folders, parts, strict=True):
                table = read_sample_table(folder / part.sample_table, declared=part.table_columns()).table
                shard = pa.array(table.column("shard").to_numpy() + base, pa.int32())
                table = table.set_column(table.schema.get_field_index("shard"), "shard", shard)
                if RECORD_SIZE_FIELD.name in table.schema.names:
                    table = table.drop_columns([RECORD_SIZE_FIELD.name])
                if order is not None:
                    rows = order[first_row:first_row + len(table)]
                    table = table.append_column(ORDER_SHARD_FIELD, pa.array(rows, ORDER_SHARD_FIELD.type))
                first_row += len(table)
                if writer is None:
                    schema = table.schema
                    writer = pa.ipc.new_file(sink, schema)
                writer.write_table(table.cast(schema))
                base += len(part.shards)
        finally:
            if writer is not None:
                writer.close()


def _order_shards(folders: list[Path], parts: list[Manifest]) -> np.ndarray | None:
    """Each sample's shard in a one-process conversion: the writers' rule (``shard_rule``) replayed over every
    part's record sizes in order; None where a part has none (packed before, or by one process)."""
    sizes = []
    for folder, part in zip(folders, parts, strict=True):
        table = read_sample_table(folder / part.sample_table, declared=part.table_columns()).table
        if RECORD_SIZE_FIELD.name not in table.schema.names:
            return None
        sizes.append(table.column(RECORD_SIZE_FIELD.name).to_numpy())
    options = parts[0].options
    empty = ArrowImageWriter.EMPTY_BYTES if options.get("format") == "arrow" else ShardWriter.EMPTY_BYTES
    return replay_shards(np.concatenate(sizes).tolist(), max_bytes=int(options["shard_size"]),
                         max_count=options.get("max_shard_samples"), empty_bytes=empty)


def _merge_lines(out: Path, folders: list[Path], name: str) -> None:
    text = "".join(read_input(f / name, MAX_STATE_FILE_BYTES).decode("utf-8") for f in folders if (f / name).is_file())
    write_atomic(out / name, text.encode())


def _merge_text(out: Path, folders: list[Path], parts: list[Manifest]) -> dict:
    """Sums of the ranks' counts and histograms; one tokenizer, the same for all (checked by hash)."""
    options = dict(parts[0].options)
    _merge_tokenizer(out, folders, parts)
    for key in _COUNTS:
        options[key] = sum(int(p.options.get(key, 0)) for p in parts)
    options["skipped"] = dict(sum((Counter(p.options.get("skipped", {})) for p in parts), Counter()))
    bins: Counter = Counter()
    for part in parts:  # [[lo, hi, count], ...] over power-of-two bins
        bins.update({(int(lo), int(hi)): int(count) for lo, hi, count in part.options.get("length_histogram", [])})
    options["length_histogram"] = [[lo, hi, count] for (lo, hi), count in sorted(bins.items())]
    shard_tokens = options.pop("shard_tokens", None)
    if shard_tokens is not None and options.get("format", "arrow") == "arrow":
        # the loader replays the token writer's rule over the rows' lengths: a one-process conversion's shards
        options[ORDER_SHARD_TOKENS] = shard_tokens
    examples: dict[str, list[str]] = {}
    for folder in folders:
        if (folder / "rejected.json").is_file():
            for kind, found in json.loads(read_input(folder / "rejected.json", MAX_STATE_FILE_BYTES)).get("examples", {}).items():
                examples.setdefault(kind, []).extend(found[:max(0, REPORT_EXAMPLES - len(examples.get(kind, [])))])
    merged = {"skipped": options["skipped"], "examples": examples}
    write_atomic(out / "rejected.json", (json.dumps(merged, indent=1, sort_keys=True) + "\n").encode())
    return options



def _merge_tokenizer(out: Path, folders: list[Path], parts: list[Manifest]) -> None:
    """The ranks' one tokenizer (the same for all, checked by hash) copied into OUT."""
    tokenizer = parts[0].options["tokenizer"]
    hashes = {p.options["tokenizer"]["sha256"] for p in parts}
    if len(hashes) != 1:
        raise DataioError(f"{out}: the ranks used {len(hashes)} different tokenizers; convert again with one "
                          "(--tokenizer FILE, or rank 0 trains it)")
    source = folders[0] / Path(tokenizer["file"]).name
    write_atomic(out / Path(tokenizer["file"]).name, read_input(source, MAX_STATE_FILE_BYTES))
