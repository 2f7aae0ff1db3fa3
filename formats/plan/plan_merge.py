"""The plan's one merge, and the checks before any item runs: ``OUT/plan.json`` and the parts.

A local OUT merges as ``dataio merge`` does (``rank_merge``). A URL OUT: the driver copies each part's small
files (manifest, sample table, rejected lists, tokenizer) into a local mirror, checks every shard of every
part where it lies (present, with the manifest's size), merges the mirror, and uploads the merged files,
``manifest.json`` last: a reader never sees a manifest before every part it names is in place. The merged
manifest's shard entries point into the part folders, so no shard is copied.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from dataio.formats.dataset.manifest import MANIFEST_NAME, Manifest, parse_manifest
from dataio.formats.errors import DataioError, UsageError
from dataio.formats.file_gate import read_input
from dataio.formats.files import refuse_link, write_atomic
from dataio.formats.limits import MAX_STATE_FILE_BYTES
from dataio.formats.remote.storage import open_location
from dataio.formats.plan.plan_table import plan_kind
from dataio.formats.plan.work_plan import PLAN_NAME, WorkPlan
from dataio.formats.ranks.rank_merge import RANK_FOLDER, merge_ranks

SMALL_FILES = ("rejected.jsonl", "rejected.json")  # besides the manifest, its sample table and tokenizer
MERGED_FILES = ("samples.arrow", "rejected.jsonl", "rejected.json", "tokenizer.json")


def start_plan(plan: WorkPlan, overwrite: bool) -> None:
    """Record the plan in OUT, or check OUT's record: parts of another plan (other options, input or item count)
    are refused, or with ``overwrite`` removed with everything else OUT holds (an index's record: in its journal)."""
    in_place = plan_kind(plan.kind).in_place
    if in_place is not None:
        in_place.start(plan, overwrite)
        return
    if plan.remote:
        _start_remote(plan, overwrite)
        return
    out = Path(plan.out)
    record = out / PLAN_NAME
    for path in (out.iterdir() if out.is_dir() and not overwrite else ()):
        if _ours(path.name):  # an item would pack, or the merge read, through it (--overwrite removes it)
            refuse_link(path, "a part or record of the plan")
    if overwrite and out.is_dir():
        for path in out.iterdir():
            if _ours(path.name):
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    elif (out / MANIFEST_NAME).exists() or (out.is_dir() and not record.is_file() and any(out.iterdir())):
        raise UsageError(f"output folder {out} is not empty (pass --overwrite to replace it)")  # as one process says
    elif record.is_file():
        _same_plan(plan, read_input(record, MAX_STATE_FILE_BYTES), str(record))
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(record, plan.record())


def _ours(name: str) -> bool:
    """What ``--overwrite`` removes: the files and folders a conversion writes (a one-process one's too), nothing
    else a user keeps beside them."""
    return bool(RANK_FOLDER.fullmatch(name)) or name in (PLAN_NAME, MANIFEST_NAME, *MERGED_FILES, ".journal") or \
        name.startswith(("shard-", ".shard-"))


def _same_plan(plan: WorkPlan, recorded: bytes, where: str) -> None:
    if recorded != plan.record():
        raise UsageError(f"{where}: OUT holds the parts of another plan (other options, input or --items); "
                         "pass --overwrite to convert again from scratch, or give the same command and input")


def _start_remote(plan: WorkPlan, overwrite: bool) -> None:
    location = open_location(plan.out, plan.storage_options)
    fs, root = location.fs, location.root
    record = location.path(PLAN_NAME)
    if overwrite:
        for path in (fs.ls(root, detail=False) if fs.exists(root) else []):
            if _ours(str(path).rstrip("/").rsplit("/", 1)[-1]):
                fs.rm(path, recursive=True)
    elif fs.exists(location.path(MANIFEST_NAME)):
        raise UsageError(f"{location.display()} already holds a converted data set (pass --overwrite to replace it)")
    elif fs.exists(record):
        _same_plan(plan, location.read_bytes(PLAN_NAME, limit=MAX_STATE_FILE_BYTES), location.display(PLAN_NAME))
        return
    fs.makedirs(root, exist_ok=True)
    fs.pipe_file(record, plan.record())


def merge_plan(plan: WorkPlan, mirror: Path) -> Manifest:
    """Merge the plan's parts into OUT; ``mirror``: the local folder a URL OUT is merged in. An index's merge
    writes the index beside the journaled tars."""
    in_place = plan_kind(plan.kind).in_place
    if in_place is not None:
        return in_place.merge(plan)
    if not plan.remote:
        return merge_ranks(plan.out)
    location = open_location(plan.out, plan.storage_options)
    for folder in (mirror.parent, mirror):  # removed and written below: never a link's folder
        refuse_link(folder, "the merge's copy of the parts' small files")
    if mirror.exists():
        shutil.rmtree(mirror)
    problems: list[str] = []
    for item in range(plan.items):
        name = plan.item_name(item)
        part = open_location(f"{plan.out.rstrip('/')}/{name}", plan.storage_options)
        manifest = _mirror_part(part, mirror / name, name)
        prefix = part.root.rstrip("/") + "/"  # each file by its path in the part: a subfolder's namesake is not it
        sizes = {path[len(prefix):]: int(info["size"]) for path, info in part.fs.find(part.root, detail=True).items()
                 if path.startswith(prefix)}
        for entry in manifest.shards:
            if sizes.get(entry.file) != entry.bytes:
                problems.append(f"{name}/{entry.file} " + ("missing" if entry.file not in sizes else
                                f"size {sizes[entry.file]} bytes, manifest says {entry.bytes}"))
            if entry.index and entry.index not in sizes:
                problems.append(f"{name}/{entry.index} missing")
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise DataioError(f"{location.display()}: not merged, parts changed since they finished: {problems[0]}{more}; "
                          "remove those part folders and run the same command again")
    merged = merge_ranks(mirror, shards_here=False)
    fs = location.fs
    for name in MERGED_FILES:
        if (mirror / name).is_file():
            fs.put_file(str(mirror / name), location.path(name))
    fs.put_file(str(mirror / MANIFEST_NAME), location.path(MANIFEST_NAME))  # last: the data set is complete
    return merged


def _mirror_part(location: Any, folder: Path, name: str) -> Manifest:
    """The part's manifest, sample table, rejected lists and tokenizer, copied into ``folder``."""
    try:
        text = location.read_bytes(MANIFEST_NAME, limit=MAX_STATE_FILE_BYTES)
    except FileNotFoundError:
        raise DataioError(f"{location.display()}: part {name} has not finished (no {MANIFEST_NAME}); run the same "
                          "command again") from None
    manifest = parse_manifest(text.decode("utf-8"), location.display(MANIFEST_NAME))
    folder.mkdir(parents=True, exist_ok=True)
    names = [n for n in (manifest.sample_table, *SMALL_FILES) if n]
    tokenizer = manifest.options.get("tokenizer")
    if isinstance(tokenizer, dict) and tokenizer.get("file"):
        names.append(Path(str(tokenizer["file"])).name)
    for small in names:
        try:  # bounded: a part's table holds its samples' rows; its lists and tokenizer are small files (sized
            # first: a range request on an empty object is refused by S3)
            if small != manifest.sample_table and location.fs.size(location.path(small)) > MAX_STATE_FILE_BYTES:
                raise DataioError(f"{location.display(small)}: larger than {MAX_STATE_FILE_BYTES:,} bytes; not merged")
            data = location.read_bytes(small)
        except FileNotFoundError:
            continue
        write_atomic(folder / small, data)
    write_atomic(folder / MANIFEST_NAME, text)
    return manifest
