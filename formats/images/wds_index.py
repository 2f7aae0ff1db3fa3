"""``dataio index SHARDS``: adopt existing WebDataset tars in place, without rewriting them.

Tars as timm's imagenet-1k-wds ships them (``KEY.jpg``/``.jpeg``/``.png`` plus ``KEY.cls``; a second picture
of a key, and a member of no kind, are left in the tar with a line each in ``rejected.jsonl``) get, beside them, what ``dataio convert images`` would have written: a DALI index
per tar, the sample table (with each image's offset, size, label, width, height and xxh3-64),
``rejected.jsonl`` and ``manifest.json``, written last. ``ImageLoader`` then reads the tars directly,
with the same output contract; the restart-marker splicing simply does not apply (the JPEGs are the
originals), so a region decode reads the file up to the crop's last row.

Tars of image-text pairs as img2dataset writes them (``KEY.jpg``/``.png``/``.webp`` plus ``KEY.txt``
and ``KEY.json``, no ``.cls``) are adopted as a pair folder (``dataio.formats.pairs``): their captions go
into the sample table, and with a tokenizer their token ids too. What a key needs beside its image and how
it reads is its kind's (``packing_kind.IndexKind``: classification's ``.cls``, the pairs' ``.txt`` and
``.json``), found by name in ``dataio.formats.kinds``; the folder's kind is the one asked
(``captions=True``: pairs, whatever the tars hold), else the one whose members the tars hold (pairs when no
key has a ``.cls`` and some have a ``.txt``), and the manifest declares it.

Members are read as bytes and only images (header only: size and pixel limit), labels (ASCII
integers), captions (UTF-8) and metadata (JSON) are looked at; nothing is unpickled or decoded with a
default handler. Each tar's result is
journaled (``.index-journal/NAME.json``, keyed by the tar's size and mtime), so an interrupted run
resumes at the first tar not yet indexed.
"""

from __future__ import annotations

import json
import os
import tarfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from collections.abc import Callable
from pathlib import Path

from dataio.formats.errors import NothingConverted, ShardError, UsageError
from dataio.formats.files import refuse_link, sha256_file, write_atomic
from dataio.formats.limits import MAX_STATE_FILE_BYTES
from dataio.formats.file_gate import open_input, read_input
from dataio.formats.images.image_headers import image_size
from dataio.formats.images.packing_kind import IndexKind, asked_kind, check_index_options, index_kind
from dataio.formats.kinds import kind_named
from dataio.formats.limits import MAX_CAPTION_BYTES
from dataio.formats.progress import progress
from dataio.formats.dataset.manifest import MANIFEST_NAME, SAMPLE_TABLE_NAME, Manifest, ShardEntry, version_for
from dataio.formats.dataset.sample_table import CHECKSUM_FIELD, MAX_MEMBER_BYTES, sample_checksum, write_sample_table
from dataio.formats.dataset.shard_members import IMAGE_MEMBERS, MEMBERS
from dataio.formats.dataset.wds_shards import MemberLocation, dali_index_text, duplicate_members, scan_tar
from dataio.formats.text.tokenizer_setup import TokenizerConfig

JOURNAL_DIR = ".index-journal"
REJECTED_NAME = "rejected.jsonl"
# The kinds whose tars ``index`` adopts, in the table's order (what a key needs is said in this order).
INDEXED = ("classification", "pairs")
# What each key of a tar needs to be adopted, beside what its kind needs: the one place that says so (each
# sample's rejection and the error when nothing was indexed name it).
IMAGE_NEEDED = f"an image member ({', '.join('.' + e for e in IMAGE_MEMBERS)})"


@dataclass(frozen=True, kw_only=True)
class IndexConfig:
    """What ``dataio index`` takes: tar files in one folder (or that folder, for every ``*.tar`` in it)."""

    shards: tuple[Path, ...]
    classes_file: Path | None = None  # one class name per line, line i is label i; else "0".."K-1"
    num_workers: int = field(default_factory=lambda: min(8, os.cpu_count() or 1))
    overwrite: bool = False
    progress: bool = True
    captions: bool | None = None  # image-text pairs (False: classes); None: as the tars' members say (INDEXED)
    tokenizer: TokenizerConfig | None = None  # pairs: store each caption's token ids too
    max_caption_bytes: int = MAX_CAPTION_BYTES  # pairs: a longer caption is listed, its pair not indexed
    kind: str = ""  # "classification" or "pairs" (what captions says); "": as the tars' members say

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", asked_kind(self.kind, self.captions))
        object.__setattr__(self, "shards", tuple(Path(s) for s in self.shards))
        if not self.shards:
            raise ValueError("shards must name at least one tar file or folder")
        if self.num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {self.num_workers}")
        if self.max_caption_bytes < 1:
            raise ValueError(f"max_caption_bytes must be >= 1, got {self.max_caption_bytes}")
        check_index_options(self)  # the options the kind asked for does not take


@dataclass(frozen=True)
class IndexSummary:
    num_samples: int
    num_rejected: int
    num_shards: int
    folder: Path
    what: str = "images"  # the samples, as their kind names them ("image-text pairs")

    def line(self) -> str:
        return (f"indexed {self.num_samples} {self.what} in {self.num_shards} tars in {self.folder}"
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


def _index_tar(path: Path, kind: IndexKind, config: IndexConfig) -> dict:
    """One tar's manifest entry (less the DALI index name), its rows and its rejected samples: a row is
    ``[key, offset, size, value, width, height, path, xxh3]``, ``value`` what the kind read beside the image
    (a label; a pair's ``[caption, json_offset, json_size]``)."""
    try:
        samples = scan_tar(path)
    except (tarfile.TarError, EOFError, OSError) as e:  # the tars indexed before it keep their journal
        raise ShardError(str(path), f"not a readable tar ({type(e).__name__}: {e}); remove or replace it, "
                                    "then rerun") from None
    rows: list[list] = []
    rejected: list[dict[str, str]] = []
    indexed: list[list[MemberLocation]] = []  # what the DALI index lists: each sample once, repeats left out
    with open_input(path) as handle:
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
            if image is None:
                rejected.append({"path": where, "reason": f"lacks {IMAGE_NEEDED}"})
                continue
            value, reason, notes = kind.read(handle, by_ext, where, config)
            rejected += notes
            if reason is not None:
                rejected.append({"path": where, "reason": reason})
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
            rows.append([key, image.offset, image.size, value, size[0], size[1],
                         f"{path.name}/{key}.{image.extension}", sample_checksum(data)])
            rejected += _left_out(path.name, key, image, components)
    extensions = Counter(c.extension.lower() for components in samples for c in components)
    return {"file": path.name, "bytes": path.stat().st_size, "sha256": sha256_file(path),
            "members": len(samples), "rows": rows, "rejected": rejected,
            "index_text": dali_index_text(indexed), "extensions": dict(extensions)}


def _left_out(tar: str, key: str, image: MemberLocation, components: list[MemberLocation]) -> list[dict[str, str]]:
    """A line for each member of an indexed key that nothing reads: a second picture (the table has one image a
    key), a member of no kind (``MEMBERS``: an embedding, a mask). It stays in the tar; it is not in the table."""
    lines = []
    for c in components:
        if c.extension.lower() in IMAGE_MEMBERS and c is not image:
            lines.append({"path": f"{tar}/{key}.{c.extension}",
                          "reason": f"a second picture of {key} ({key}.{image.extension} is indexed): not indexed"})
        elif c.extension.lower() not in MEMBERS:
            lines.append({"path": f"{tar}/{key}.{c.extension}",
                          "reason": f"a member no kind reads (only .{', .'.join(MEMBERS)}): not indexed"})
    return lines


def _read(handle, member: MemberLocation) -> bytes:
    return os.pread(handle.fileno(), member.size, member.offset)


def saved_result(folder: Path, path: Path, kind: IndexKind, config: IndexConfig) -> dict | None:
    """The tar's journaled result if the tar (and how it is read) is unchanged since it was journaled, else None."""
    try:
        saved = json.loads(read_input(folder / JOURNAL_DIR / f"{path.name}.json", MAX_STATE_FILE_BYTES))
        if saved.get("stamp") == _stamp(path, kind, config):
            return saved
    except (OSError, ValueError):
        pass
    return None


def _stamp(path: Path, kind: IndexKind, config: IndexConfig) -> list:
    """What a journal is valid for: the tar's size, mtime and ctime (a rewrite that kept size and mtime, as
    `cp -p` or `rsync -a` do, still moves the ctime, which no call can set back) and how it is read."""
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, kind.name, *kind.stamp(config)]


def _journaled(folder: Path, path: Path, kind: IndexKind, config: IndexConfig) -> dict:
    """``_index_tar(path, ...)``, from its journal when the tar (and how it is read) is unchanged since."""
    saved = saved_result(folder, path, kind, config)
    if saved is not None:
        return saved
    result = {**_index_tar(path, kind, config), "stamp": _stamp(path, kind, config)}
    write_atomic(folder / JOURNAL_DIR / f"{path.name}.json", json.dumps(result).encode())
    return result


def journal_tars(folder: Path, tars: list[Path], kind: IndexKind, config: IndexConfig,
                 done: Callable[[], None] = lambda: None) -> list[dict]:
    """Each tar's result in order, journaled (a journaled, unchanged tar is not read again): what ``index_shards``
    and a plan's item (``formats/plan/index_plan``: a group of the tars) both run; ``done`` after each tar."""
    refuse_link(folder / JOURNAL_DIR, "its index journal")  # a link's folder would get (and lose) the journal
    (folder / JOURNAL_DIR).mkdir(exist_ok=True)
    with ThreadPoolExecutor(config.num_workers) as pool:  # pread, sha256 and xxh3 release the GIL
        results = []
        for result in pool.map(lambda t: _journaled(folder, t, kind, config), tars):
            results.append(result)
            done()
    return results


def indexed_folder(config: IndexConfig) -> tuple[Path, list[Path]]:
    """``tar_files(config.shards)``, refused when the folder holds a manifest and ``config.overwrite`` is not set."""
    folder, tars = tar_files(config.shards)
    if (folder / MANIFEST_NAME).exists() and not config.overwrite:
        raise UsageError(f"{folder / MANIFEST_NAME} exists; pass --overwrite to index {folder} again")
    return folder, tars


def index_shards(config: IndexConfig) -> IndexSummary:
    """Write DALI indexes, the sample table, rejected.jsonl and (last) the manifest beside the tars."""
    folder, tars = indexed_folder(config)
    kind = index_kind(config.kind or held_kind(tars, config.num_workers))
    kind.start(config)  # a pair's tokenizer file, loaded once before any tar is read
    bar = progress(total=len(tars), unit="tar", desc="index", enabled=config.progress)
    results = journal_tars(folder, tars, kind, config, bar.update)
    bar.close()
    classes = kind.classes(config, [row[3] for r in results for row in r["rows"]])
    own = ("key", "shard", "offset", "size", "width", "height", "path", CHECKSUM_FIELD.name)
    columns: dict[str, list] = {n: [] for n in ("key", "shard", "offset", "size", *kind.index_columns, *own[4:])}
    rejected, entries, indexes = [], [], {}
    for shard, result in enumerate(results):
        kept = []
        for key, offset, size, value, width, height, path, checksum in result["rows"]:
            outside = kind.outside(value, classes, config)
            if outside:
                rejected.append({"path": f"{result['file']}/{key}", "reason": outside})
                continue
            kept.append(key)
            for name, own_value in zip(own, (key, shard, offset, size, width, height, path, checksum), strict=True):
                columns[name].append(own_value)
            for name, kind_value in zip(kind.index_columns, kind.values(value), strict=True):
                columns[name].append(kind_value)
        rejected += result["rejected"]
        index_name = result["file"][: -len(".tar")] + ".idx"
        indexes[index_name] = result["index_text"]
        entries.append(ShardEntry(file=result["file"], index=index_name, num_samples=len(kept),
                                  bytes=result["bytes"], sha256=result["sha256"],
                                  num_skipped=result["members"] - len(kept)))
    if not columns["key"]:
        _write_rejected(folder, rejected)
        _remove_journal(folder)
        raise NothingConverted(_nothing_indexed(folder, results))
    options: dict = {"adopted": "webdataset", "sample_checksum": CHECKSUM_FIELD.name, "restart_interval": 0}
    before = set(columns)
    failed = kind.finish(columns, options, config.tokenizer, folder)  # last columns: a pair's token ids
    if failed:  # a user's tokenizer failed on these captions: their pairs are rejected, one line each
        entries = _drop_rows(columns, before, failed, entries, rejected, results)
        if not columns["key"]:
            _write_rejected(folder, rejected)
            _remove_journal(folder)
            first = next(line for line in rejected if line["reason"] == failed[min(failed)])
            raise NothingConverted(f"nothing indexed in {folder}: the tokenizer failed on every caption ({first['path']}: "
                                   f"{first['reason']}); each pair is listed in {folder / REJECTED_NAME}")
    options.update(kind.index_options(columns["path"]))
    _write_rejected(folder, rejected)
    for index_name, text in indexes.items():
        write_atomic(folder / index_name, text.encode())
    write_sample_table(folder / SAMPLE_TABLE_NAME, columns)
    fields = kind_named(kind.name).part("fields")(options)
    Manifest(kind="images", num_samples=len(columns["key"]), shards=tuple(entries), classes=classes,
             num_rejected=len(rejected), options=options, fields=fields, sample_kind=kind.name,
             version=version_for("images", fields)).write(folder)
    _remove_journal(folder)
    return IndexSummary(len(columns["key"]), len(rejected), len(entries), folder, kind.what)


def _write_rejected(folder: Path, rejected: list[dict[str, str]]) -> None:
    rejected.sort(key=lambda r: r["path"])
    write_atomic(folder / REJECTED_NAME, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rejected).encode())


def _drop_rows(columns: dict[str, list], before: set[str], failed: dict[int, str], entries: list[ShardEntry],
               rejected: list[dict[str, str]], results: list[dict]) -> list[ShardEntry]:
    """``failed`` rows out of the columns that were there ``before`` the kind's last ones (which left them
    out already), each a rejected line naming ``TAR/KEY``; the shard entries recounted."""
    for row, reason in sorted(failed.items()):
        rejected.append({"path": f"{results[columns['shard'][row]]['file']}/{columns['key'][row]}", "reason": reason})
    keep = [row not in failed for row in range(len(columns["key"]))]
    for name in before:
        columns[name] = [value for value, kept in zip(columns[name], keep, strict=True) if kept]
    counts = Counter(columns["shard"])
    return [replace(entry, num_samples=counts[shard], num_skipped=entry.num_skipped + entry.num_samples - counts[shard])
            for shard, entry in enumerate(entries)]


def held_kind(tars: list[Path], num_workers: int) -> str:
    """The kind the tars hold, by their members' extensions (member names only; a tar that cannot be listed is
    named when it is indexed): the first of ``INDEXED`` that claims them."""
    found: set[str] = set()

    def extensions(path: Path) -> set[str]:
        try:
            return {c.extension.lower() for components in scan_tar(path) for c in components}
        except (tarfile.TarError, EOFError, OSError):
            return set()

    with ThreadPoolExecutor(num_workers) as pool:
        for names in pool.map(extensions, tars):
            found |= names
    return next(name for name in INDEXED if index_kind(name).claims(found))


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
    needed = " or ".join(f"{kind.needed} ({kind.named})" for kind in map(index_kind, INDEXED))
    return (f"nothing indexed in {folder}: dataio index needs {IMAGE_NEEDED} and {needed} per key; the "
            f"{len(results)} tar(s) hold "
            f"{keys} key(s) with {held}{listed}")
