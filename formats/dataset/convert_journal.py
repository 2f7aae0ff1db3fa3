"""Resumable conversions: one small journal file per finished shard.

After a shard is renamed into place, the converter writes
``OUT/.journal/NNNNNN.json``: the shard's manifest entry, the rows it holds,
the files rejected since the previous shard, and where to continue reading
(source files consumed, or the text converter's running totals). Rerunning
the same command after a crash or SIGKILL reads the journals in order, keeps
each shard whose size and sha256 still match, drops everything after the
first that does not (and every partial file), and continues from the input
position after the last kept shard. Shard boundaries
and sample keys only depend on the input sequence, so the result is
byte-identical to an uninterrupted run. ``OUT/.journal/options.json``
fingerprints the command; a rerun with other options is refused. The
journal is removed once the manifest is written. ``check_output_folder``
is the output-folder rule of every converter.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dataio.formats.errors import ConfigError, UsageError
from dataio.formats.files import refuse_link, sha256_file, write_atomic
from dataio.formats.limits import MAX_STATE_FILE_BYTES
from dataio.formats.file_gate import read_input
from dataio.formats.dataset.manifest import MANIFEST_NAME
from dataio.formats.dataset.out_lock import LOCK_NAME

JOURNAL_DIR = ".journal"


def fingerprint(options: dict[str, Any], files: list[tuple[str, int]]) -> str:
    """sha256 of the options and the source file list: the identity of a conversion."""
    payload = json.dumps({"options": options, "files": files}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass
class ShardRecord:
    """What one finished shard adds to the conversion."""

    entry: dict[str, Any]
    files_end: int = 0  # source files consumed once this shard is finished
    rows: list[list[Any]] = field(default_factory=list)  # converter-specific per-sample rows
    rejected: list[dict[str, str]] = field(default_factory=list)
    converted: int = 0
    totals: dict[str, Any] = field(default_factory=dict)  # converter-specific running totals at this shard's end
    sizes: list[int] = field(default_factory=list)  # each row's size in the shard rule's units (``shard_rule``)


class Journal:
    """The journal folder of one output folder."""

    def __init__(self, out: Path, identity: str) -> None:
        self.folder = out / JOURNAL_DIR
        self.identity = identity

    def start(self, out: Path, overwrite: bool, patterns: tuple[str, ...],
              keep: tuple[str, ...] = ()) -> list[ShardRecord]:
        """Prepare OUT; returns the records of the shards a previous, interrupted run finished.

        On a resume, files matching ``patterns`` are removed except the kept
        shards and the names in ``keep`` (which the converter re-checks itself).
        """
        refuse_link(self.folder, "its journal")
        interrupted = self.folder.is_dir() and not (out / MANIFEST_NAME).exists()
        if interrupted and not overwrite:
            options = self.folder / "options.json"
            saved = json.loads(read_input(options, MAX_STATE_FILE_BYTES)) if options.is_file() else {"identity": self.identity}
            if saved.get("identity") != self.identity:
                raise ConfigError(f"{out} holds an interrupted conversion with other options or source files "
                                 "(pass {0} to start again)", "overwrite=True")
            self._begin()
            return self._kept(out, patterns, set(keep))
        check_output_folder(out, overwrite, patterns)
        shutil.rmtree(self.folder, ignore_errors=True)
        self._begin()
        return []

    def _begin(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        write_atomic(self.folder / "options.json", json.dumps({"identity": self.identity}).encode())

    def _kept(self, out: Path, patterns: tuple[str, ...], keep: set[str]) -> list[ShardRecord]:
        """Records of intact finished shards, in order; removes every other output file."""
        records: list[ShardRecord] = []
        for index in range(len(list(self.folder.glob("[0-9]*.json")))):
            path = self.folder / f"{index:06d}.json"
            try:
                record = ShardRecord(**json.loads(read_input(path, MAX_STATE_FILE_BYTES)))
            except (OSError, ValueError, TypeError):
                break
            shard = out / record.entry["file"]
            if not (shard.is_file() and shard.stat().st_size == record.entry["bytes"]
                    and sha256_file(shard) == record.entry["sha256"]):
                break
            records.append(record)
        keep |= {r.entry["file"] for r in records} | {r.entry.get("index") for r in records}
        _remove(out, patterns, keep=keep)
        for path in self.folder.glob("[0-9]*.json"):
            if int(path.stem) >= len(records):
                path.unlink()
        return records

    def add(self, index: int, record: ShardRecord) -> None:
        write_atomic(self.folder / f"{index:06d}.json", json.dumps(asdict(record)).encode())

    def note(self, name: str, value: Any) -> None:
        """Remember a JSON value for a rerun (e.g. the hash of a tokenizer trained by this run)."""
        write_atomic(self.folder / f"note-{name}.json", json.dumps(value).encode())

    def noted(self, name: str) -> Any:
        """A value ``note`` saved, or None."""
        try:
            return json.loads(read_input(self.folder / f"note-{name}.json", MAX_STATE_FILE_BYTES))
        except (OSError, ValueError):
            return None

    def finish(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def check_output_folder(out: Path, overwrite: bool, patterns: tuple[str, ...]) -> None:
    """Refuse a non-empty OUT unless ``overwrite``; then remove only dataio's own files (``patterns``).

    The converter's own lock file (``out_lock``) does not count: it is taken before this check.
    """
    if out.exists() and not out.is_dir():
        raise UsageError(f"output {out} exists and is not a folder")
    if out.is_dir() and any(p.name != LOCK_NAME for p in out.iterdir()):
        if not overwrite:
            raise ConfigError(f"output folder {out} is not empty (pass {{0}} to replace it)", "overwrite=True")
        _remove(out, patterns)
    out.mkdir(parents=True, exist_ok=True)


def _remove(out: Path, patterns: tuple[str, ...], keep: set = frozenset()) -> None:
    for pattern in patterns:
        for path in out.glob(pattern):
            if path.name not in keep and path.is_file():
                path.unlink()


class JournalledShards:
    """A converter's shard records across a resume (what image and COCO conversion share): those a previous run
    finished (``done``), the one being filled (``pending``: its rows, rejections, conversions), each journalled as
    its shard closes, and where reading resumes (``start``)."""

    def __init__(self, journal: Journal, done: list[ShardRecord]) -> None:
        self.journal, self.done = journal, done
        self.records = list(done)
        self.start = done[-1].files_end if done else 0  # source files the kept shards consumed
        self.pending = ShardRecord(entry={}, files_end=self.start)

    def finished(self, shard_index: int, entry: Any, files_end: int) -> None:
        """Shard ``shard_index`` (its manifest ``entry``, a dataclass) closed after ``files_end`` source files."""
        self.pending.entry, self.pending.files_end = asdict(entry), files_end
        self.journal.add(shard_index, self.pending)
        self.records.append(self.pending)
        self.pending = ShardRecord(entry={}, files_end=files_end)

    def close(self) -> None:
        """The record of the files after the last shard (rejected ones only) joins the others."""
        self.records.append(self.pending)

    def rejected(self, early: list[tuple[str, str]]) -> list[dict[str, str]]:
        """Every rejection, ``early`` ones (path, reason) found before packing included, sorted."""
        return sorted([{"path": path, "reason": reason} for path, reason in early]
                      + [r for record in self.records for r in record.rejected], key=lambda r: (r["path"], r["reason"]))

    def converted(self) -> int:
        """Images converted to JPEG over every record."""
        return sum(record.converted for record in self.records)
