"""``dataio index SHARDS``: adopt existing WebDataset tars in place, without rewriting them.

Tars as timm's imagenet-1k-wds ships them (``KEY.jpg``/``.jpeg``/``.png`` plus ``KEY.cls``, other
members ignored) get, beside them, what ``dataio convert images`` would have written: a DALI index
per tar, the sample table (with each image's offset, size, label, width, height and xxh3-64),
``rejected.jsonl`` and ``manifest.json``, written last. ``ImageLoader`` then reads the tars directly,
with the same output contract; the restart-marker splicing simply does not apply (the JPEGs are the
originals), so a region decode reads the file up to the crop's last row.

Tars of image-text pairs as img2dataset writes them (``KEY.jpg``/``.png``/``.webp`` plus ``KEY.txt``
and ``KEY.json``, no ``.cls``) are adopted as a pair folder (``dataio.formats.pairs.pair_fields``):
their captions go into the sample table, and with a tokenizer their token ids too
(``caption_tokens``); ``caption_index`` reads them and says what becomes of an awkward pair. A folder is
a pair folder when no key has a ``.cls`` and some have a ``.txt`` (``captions=True`` says so whatever
the tars hold).

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
from dataclasses import dataclass, field
from pathlib import Path


from dataio.formats.images.class_names import label_outside, numbered_classes, read_class_names
from dataio.formats.errors import NothingConverted, ShardError, UsageError
from dataio.formats.files import sha256_file, write_atomic
from dataio.formats.images.image_headers import image_size
from dataio.formats.progress import progress
from dataio.formats.dataset.manifest import MANIFEST_NAME, SAMPLE_TABLE_NAME, Manifest, ShardEntry
from dataio.formats.pairs.pair_fields import MAX_CAPTION_BYTES, NO_LABEL, pair_fields
from dataio.formats.dataset.sample_fields import IMAGE_FIELDS, member_columns
from dataio.formats.dataset.sample_table import CHECKSUM_FIELD, MAX_MEMBER_BYTES, sample_checksum, write_sample_table
from dataio.formats.dataset.shard_members import CAPTION_MEMBER, IMAGE_MEMBERS, LABEL_MEMBER, MAX_LABEL_BYTES
from dataio.formats.dataset.wds_shards import MemberLocation, dali_index_text, duplicate_members, scan_tar
from dataio.formats.pairs.caption_index import CAPTION_NEEDED, pair_text
from dataio.formats.pairs.caption_tokens import caption_ids, checked_tokenizer, token_dtype_name
from dataio.formats.text.tokenizer_setup import TokenizerConfig

JOURNAL_DIR = ".index-journal"
REJECTED_NAME = "rejected.jsonl"
# What each key of a tar needs to be adopted: the one place that says so (each sample's rejection and the
# error when nothing was indexed name these).
IMAGE_NEEDED = f"an image member ({', '.join('.' + e for e in IMAGE_MEMBERS)})"
LABEL_NEEDED = f"a .{LABEL_MEMBER} member"
MEMBERS_NEEDED = f"{IMAGE_NEEDED} and {LABEL_NEEDED} (classes) or {CAPTION_NEEDED} (image-text pairs) per key"


@dataclass(frozen=True, kw_only=True)
class IndexConfig:
    """What ``dataio index`` takes: tar files in one folder (or that folder, for every ``*.tar`` in it)."""

    shards: tuple[Path, ...]
    classes_file: Path | None = None  # one class name per line, line i is label i; else "0".."K-1"
    num_workers: int = field(default_factory=lambda: min(8, os.cpu_count() or 1))
    overwrite: bool = False
    progress: bool = True
    captions: bool | None = None  # image-text pairs; None: when no key has a .cls and some a .txt
    tokenizer: TokenizerConfig | None = None  # pairs: store each caption's token ids too
    max_caption_bytes: int = MAX_CAPTION_BYTES  # pairs: a longer caption is listed, its pair not indexed

    def __post_init__(self) -> None:
        object.__setattr__(self, "shards", tuple(Path(s) for s in self.shards))
        if not self.shards:
            raise ValueError("shards must name at least one tar file or folder")
        if self.num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {self.num_workers}")
        if self.max_caption_bytes < 1:
            raise ValueError(f"max_caption_bytes must be >= 1, got {self.max_caption_bytes}")
        if self.captions is False and self.tokenizer is not None:
            raise ValueError("tokenizer is for image-text pairs (captions), not classes")


@dataclass(frozen=True)
class IndexSummary:
    num_samples: int
    num_rejected: int
    num_shards: int
    folder: Path
    pairs: bool = False

    def line(self) -> str:
        what = "image-text pairs" if self.pairs else "images"
        return (f"indexed {self.num_samples} {what} in {self.num_shards} tars in {self.folder}"
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


def _index_tar(path: Path, pairs: bool, max_caption: int) -> dict:
    """One tar's manifest entry (less the DALI index name), its rows and its rejected samples: a row is
    ``[key, offset, size, label, width, height, path, xxh3]``, a pair's label its ``[caption, json_offset,
    json_size]``."""
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
            if image is None or (LABEL_MEMBER not in by_ext and not pairs):
                missing = IMAGE_NEEDED if image is None else LABEL_NEEDED
                rejected.append({"path": where, "reason": f"lacks {missing}"})
                continue
            if pairs:
                label, reason, notes = pair_text(handle, by_ext, where, max_caption)
                rejected += notes
            else:
                label = _label(handle, by_ext[LABEL_MEMBER])
                reason = None if label is not None else ".cls is not a non-negative integer"
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
            rows.append([key, image.offset, image.size, label, size[0], size[1],
                         f"{path.name}/{key}.{image.extension}", sample_checksum(data)])
    extensions = Counter(c.extension.lower() for components in samples for c in components)
    return {"file": path.name, "bytes": path.stat().st_size, "sha256": sha256_file(path),
            "members": len(samples), "rows": rows, "rejected": rejected,
            "index_text": dali_index_text(indexed), "extensions": dict(extensions)}


def _read(handle, member: MemberLocation) -> bytes:
    return os.pread(handle.fileno(), member.size, member.offset)


def _journaled(folder: Path, path: Path, pairs: bool, max_caption: int) -> dict:
    """``_index_tar(path, ...)``, from its journal when the tar (and how it is read) is unchanged since."""
    stat = path.stat()
    stamp = [stat.st_size, stat.st_mtime_ns, pairs, max_caption]
    journal = folder / JOURNAL_DIR / f"{path.name}.json"
    try:
        saved = json.loads(journal.read_text())
        if saved.get("stamp") == stamp:
            return saved
    except (OSError, ValueError):
        pass
    result = {**_index_tar(path, pairs, max_caption), "stamp": stamp}
    write_atomic(journal, json.dumps(result).encode())
    return result


def _classes(config: IndexConfig, labels: list[int]) -> tuple[str, ...]:
    return numbered_classes(labels) if config.classes_file is None else read_class_names(config.classes_file)


def index_shards(config: IndexConfig) -> IndexSummary:
    """Write DALI indexes, the sample table, rejected.jsonl and (last) the manifest beside the tars."""
    folder, tars = tar_files(config.shards)
    if (folder / MANIFEST_NAME).exists() and not config.overwrite:
        raise UsageError(f"{folder / MANIFEST_NAME} exists; pass --overwrite to index {folder} again")
    checked_tokenizer(config.tokenizer)
    (folder / JOURNAL_DIR).mkdir(exist_ok=True)
    with ThreadPoolExecutor(config.num_workers) as pool:  # pread, sha256 and xxh3 release the GIL
        pairs = config.captions if config.captions is not None else _holds_pairs(pool, tars)
        bar = progress(total=len(tars), unit="tar", desc="index", enabled=config.progress)
        results = []
        for result in pool.map(lambda t: _journaled(folder, t, pairs, config.max_caption_bytes), tars):
            results.append(result)
            bar.update()
        bar.close()
    classes = () if pairs else _classes(config, [row[3] for r in results for row in r["rows"]])
    text_columns = ("caption", *member_columns("json")) if pairs else ("label",)
    columns: dict[str, list] = {n: [] for n in ("key", "shard", "offset", "size", *text_columns, "label", "width",
                                                "height", "path", CHECKSUM_FIELD.name)}
    rejected, entries, indexes = [], [], {}
    for shard, result in enumerate(results):
        kept = []
        for row in result["rows"]:
            outside = not pairs and label_outside(row[3], classes, named=config.classes_file is not None)
            if outside:
                rejected.append({"path": f"{result['file']}/{row[0]}", "reason": outside})
                continue
            kept.append(row)
            for name, value in zip(("key", "offset", "size", "label", "width", "height", "path",
                                    CHECKSUM_FIELD.name), row):
                if name == "label" and pairs:  # [caption, json_offset, json_size]
                    for text_name, text_value in zip(text_columns, value):
                        columns[text_name].append(text_value)
                    value = NO_LABEL
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
    options: dict = {"adopted": "webdataset", "sample_checksum": CHECKSUM_FIELD.name, "restart_interval": 0}
    fields = IMAGE_FIELDS
    if pairs:
        token_dtype = None
        if config.tokenizer is not None:
            columns["input_ids"], options["tokenizer"] = caption_ids(columns["caption"], config.tokenizer, folder)
            token_dtype = token_dtype_name(options["tokenizer"])
        fields = pair_fields(_image_dtype(columns["path"]), token_dtype)
    write_sample_table(folder / SAMPLE_TABLE_NAME, columns)
    Manifest(kind="images", num_samples=len(columns["key"]), shards=tuple(entries), classes=classes,
             num_rejected=len(rejected), options=options, fields=fields).write(folder)
    _remove_journal(folder)
    return IndexSummary(len(columns["key"]), len(rejected), len(entries), folder, pairs)


def _holds_pairs(pool: ThreadPoolExecutor, tars: list[Path]) -> bool:
    """Whether the tars are image-text pairs: no key has a ``.cls`` member and some have a ``.txt`` (member
    names only; a tar that cannot be listed is named when it is indexed)."""
    found: set[str] = set()

    def extensions(path: Path) -> set[str]:
        try:
            return {c.extension.lower() for components in scan_tar(path) for c in components}
        except (tarfile.TarError, EOFError, OSError):
            return set()

    for names in pool.map(extensions, tars):
        found |= names
    return LABEL_MEMBER not in found and CAPTION_MEMBER in found


def _image_dtype(paths: list[str]) -> str:
    """The images' encoding as the image field declares it: ``jpeg``, ``png``, ``webp``, or ``mixed``."""
    kinds = {path.rsplit(".", 1)[-1].lower().replace("jpg", "jpeg") for path in paths}
    return kinds.pop() if len(kinds) == 1 else "mixed"


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
