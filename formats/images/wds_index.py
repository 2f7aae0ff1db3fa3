"""``dataio index SHARDS``: adopt existing WebDataset tars in place, without rewriting them.

Tars as timm's imagenet-1k-wds ships them (``KEY.jpg``/``.jpeg``/``.png`` plus ``KEY.cls``, other
members ignored) get, beside them, what ``dataio convert images`` would have written: a DALI index
per tar, the sample table (with each image's offset, size, label, width, height and xxh3-64),
``rejected.jsonl`` and ``manifest.json``, written last. ``ImageLoader`` then reads the tars directly,
with the same output contract; the restart-marker splicing simply does not apply (the JPEGs are the
originals), so a region decode reads the file up to the crop's last row.

Members are read as bytes and only images (header only: size and pixel limit) and labels (ASCII
integers) are looked at; nothing is unpickled or decoded with a default handler. Each tar's result is
journaled (``.index-journal/NAME.json``, keyed by the tar's size and mtime), so an interrupted run
resumes at the first tar not yet indexed.
"""

from __future__ import annotations

import json
import os
import tarfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path


from dataio.formats.images.class_names import label_outside, numbered_classes, read_class_names
from dataio.formats.errors import NothingConverted, ShardError, UsageError
from dataio.formats.files import sha256_file, write_atomic
from dataio.formats.images.image_headers import image_size
from dataio.formats.progress import progress
from dataio.formats.dataset.manifest import MANIFEST_NAME, SAMPLE_TABLE_NAME, Manifest, ShardEntry
from dataio.formats.dataset.sample_fields import IMAGE_FIELDS
from dataio.formats.dataset.sample_table import CHECKSUM_FIELD, MAX_MEMBER_BYTES, sample_checksum, write_sample_table
from dataio.formats.dataset.shard_members import IMAGE_MEMBERS, LABEL_MEMBER, MAX_LABEL_BYTES
from dataio.formats.dataset.wds_shards import MemberLocation, dali_index_text, duplicate_members, scan_tar

JOURNAL_DIR = ".index-journal"
REJECTED_NAME = "rejected.jsonl"
# What each key of a tar needs to be adopted: the one place that says so (each sample's rejection and the
# error when nothing was indexed name these).
IMAGE_NEEDED = f"an image member ({', '.join('.' + e for e in IMAGE_MEMBERS)})"
LABEL_NEEDED = f"a .{LABEL_MEMBER} member"
MEMBERS_NEEDED = f"{IMAGE_NEEDED} and {LABEL_NEEDED} per key"


@dataclass(frozen=True, kw_only=True)
class IndexConfig:
    """What ``dataio index`` takes: tar files in one folder (or that folder, for every ``*.tar`` in it)."""

    shards: tuple[Path, ...]
    classes_file: Path | None = None  # one class name per line, line i is label i; else "0".."K-1"
    num_workers: int = field(default_factory=lambda: min(8, os.cpu_count() or 1))
    overwrite: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "shards", tuple(Path(s) for s in self.shards))
        if not self.shards:
            raise ValueError("shards must name at least one tar file or folder")
        if self.num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {self.num_workers}")


@dataclass(frozen=True)
class IndexSummary:
    num_samples: int
    num_rejected: int
    num_shards: int
    folder: Path

    def line(self) -> str:
        return (f"indexed {self.num_samples} images in {self.num_shards} tars in {self.folder}"
                + (f" ({self.num_rejected} rejected, listed in {self.folder / REJECTED_NAME})"
                   if self.num_rejected else ""))


def tar_files(shards: tuple[Path, ...]) -> tuple[Path, list[Path]]:
    """(their folder, the tars): every argument is a ``.tar`` file, or a folder whose ``*.tar`` are taken."""
    tars: list[Path] = []
    for path in shards:
        if path.is_dir():
            tars += sorted(path.glob("*.tar"))
        elif path.is_file() and path.suffix == ".tar":
            tars.append(path)
        else:
            raise UsageError(f"{path}: not a .tar file or a folder of them")
    if not tars:
        raise UsageError(f"no .tar files in {', '.join(map(str, shards))}")
    folders = {t.resolve().parent for t in tars}
    if len(folders) > 1:
        raise UsageError(f"the tars are in {len(folders)} folders; index one folder at a time")
    if len({t.name for t in tars}) != len(tars):
        raise UsageError("a tar is named twice")
    return folders.pop(), sorted(tars, key=lambda t: t.name)


def _label(handle, member: MemberLocation) -> int | None:
    """The ``.cls`` member's non-negative integer, or None; a member too long to be one is not read."""
    if member.size > MAX_LABEL_BYTES:
        return None
    try:
        text = _read(handle, member).decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    return int(text) if text.isdigit() and len(text) < 10 else None


def _index_tar(path: Path) -> dict:
    """One tar's manifest entry (less the DALI index name), its rows and its rejected samples."""
    try:
        samples = scan_tar(path)
    except (tarfile.TarError, EOFError, OSError) as e:  # the tars indexed before it keep their journal
        raise ShardError(str(path), f"not a readable tar ({type(e).__name__}: {e}); remove or replace it, "
                                    "then rerun") from None
    rows: list[list] = []
    rejected: list[dict[str, str]] = []
    indexed: list[list[MemberLocation]] = []  # what the DALI index lists: each sample once, repeats left out
    with open(path, "rb") as handle:
        for components in samples:
            components, repeats = duplicate_members(components)
            indexed.append(components)
            by_ext = {c.extension.lower(): c for c in components}
            key = components[0].key
            where = f"{path.name}/{key}"
            rejected += [{"path": f"{path.name}/{r.key}.{r.extension}",
                          "reason": f"{r.key}.{r.extension} appears again at byte {r.offset}: the first one "
                                    "(the tar's earlier member) is kept"} for r in repeats]
            image = next((by_ext[e] for e in IMAGE_MEMBERS if e in by_ext), None)
            if image is None or LABEL_MEMBER not in by_ext:
                missing = IMAGE_NEEDED if image is None else LABEL_NEEDED
                rejected.append({"path": where, "reason": f"lacks {missing}"})
                continue
            label = _label(handle, by_ext[LABEL_MEMBER])
            if label is None:
                rejected.append({"path": where, "reason": ".cls is not a non-negative integer"})
                continue
            if image.size > MAX_MEMBER_BYTES:  # never read whole: it is not an image
                rejected.append({"path": where, "reason": f"image member of {image.size} bytes is absurd "
                                                          f"(> {MAX_MEMBER_BYTES})"})
                continue
            data = _read(handle, image)
            size = image_size(data)
            if isinstance(size, str):
                rejected.append({"path": where, "reason": size})
                continue
            rows.append([key, image.offset, image.size, label, size[0], size[1],
                         f"{path.name}/{key}.{image.extension}", sample_checksum(data)])
    extensions = Counter(c.extension.lower() for components in samples for c in components)
    return {"file": path.name, "bytes": path.stat().st_size, "sha256": sha256_file(path),
            "members": len(samples), "rows": rows, "rejected": rejected,
            "index_text": dali_index_text(indexed), "extensions": dict(extensions)}


def _read(handle, member: MemberLocation) -> bytes:
    return os.pread(handle.fileno(), member.size, member.offset)


def _journaled(folder: Path, path: Path) -> dict:
    """``_index_tar(path)``, from its journal when the tar is unchanged since."""
    stat = path.stat()
    stamp = [stat.st_size, stat.st_mtime_ns]
    journal = folder / JOURNAL_DIR / f"{path.name}.json"
    try:
        saved = json.loads(journal.read_text())
        if saved.get("stamp") == stamp:
            return saved
    except (OSError, ValueError):
        pass
    result = {**_index_tar(path), "stamp": stamp}
    write_atomic(journal, json.dumps(result).encode())
    return result


def _classes(config: IndexConfig, labels: list[int]) -> tuple[str, ...]:
    return numbered_classes(labels) if config.classes_file is None else read_class_names(config.classes_file)


def index_shards(config: IndexConfig) -> IndexSummary:
    """Write DALI indexes, the sample table, rejected.jsonl and (last) the manifest beside the tars."""
    folder, tars = tar_files(config.shards)
    if (folder / MANIFEST_NAME).exists() and not config.overwrite:
        raise UsageError(f"{folder / MANIFEST_NAME} exists; pass --overwrite to index {folder} again")
    (folder / JOURNAL_DIR).mkdir(exist_ok=True)
    with ThreadPoolExecutor(config.num_workers) as pool:  # pread, sha256 and xxh3 release the GIL
        bar = progress(total=len(tars), unit="tar", desc="index", enabled=config.progress)
        results = []
        for result in pool.map(lambda t: _journaled(folder, t), tars):
            results.append(result)
            bar.update()
        bar.close()
    classes = _classes(config, [row[3] for r in results for row in r["rows"]])
    columns: dict[str, list] = {n: [] for n in ("key", "shard", "offset", "size", "label", "width", "height",
                                                "path", CHECKSUM_FIELD.name)}
    rejected, entries, indexes = [], [], {}
    for shard, result in enumerate(results):
        kept = []
        for row in result["rows"]:
            outside = label_outside(row[3], classes, named=config.classes_file is not None)
            if outside:
                rejected.append({"path": f"{result['file']}/{row[0]}", "reason": outside})
                continue
            kept.append(row)
            for name, value in zip(("key", "offset", "size", "label", "width", "height", "path",
                                    CHECKSUM_FIELD.name), row):
                columns[name].append(value)
            columns["shard"].append(shard)
        rejected += result["rejected"]
        index_name = result["file"][: -len(".tar")] + ".idx"
        indexes[index_name] = result["index_text"]
        entries.append(ShardEntry(file=result["file"], index=index_name, num_samples=len(kept),
                                  bytes=result["bytes"], sha256=result["sha256"],
                                  num_skipped=result["members"] - len(kept)))
    rejected.sort(key=lambda r: r["path"])
    write_atomic(folder / REJECTED_NAME, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rejected).encode())
    if not columns["key"]:
        _remove_journal(folder)
        raise NothingConverted(_nothing_indexed(folder, results))
    for index_name, text in indexes.items():
        write_atomic(folder / index_name, text.encode())
    write_sample_table(folder / SAMPLE_TABLE_NAME, columns)
    options = {"adopted": "webdataset", "sample_checksum": CHECKSUM_FIELD.name, "restart_interval": 0}
    Manifest(kind="images", num_samples=len(columns["key"]), shards=tuple(entries), classes=classes,
             num_rejected=len(rejected), options=options, fields=IMAGE_FIELDS).write(folder)
    _remove_journal(folder)
    return IndexSummary(len(columns["key"]), len(rejected), len(entries), folder)


def _remove_journal(folder: Path) -> None:
    for journal in (folder / JOURNAL_DIR).glob("*.json"):
        journal.unlink()
    (folder / JOURNAL_DIR).rmdir()


def _nothing_indexed(folder: Path, results: list[dict]) -> str:
    """Why no sample was indexed: what each key needs, and the members the tars hold instead."""
    keys = sum(r["members"] for r in results)
    found: Counter = Counter()
    for result in results:
        found.update(result.get("extensions", {}))
    held = ", ".join(f".{ext} ({count})" for ext, count in sorted(found.items())) or "no members"
    listed = f"; each key is listed with the reason in {folder / REJECTED_NAME}" if keys else ""
    return (f"nothing indexed in {folder}: dataio index needs {MEMBERS_NEEDED}; the {len(results)} tar(s) hold "
            f"{keys} key(s) with {held}{listed}")
