"""The manifest of a shard folder: what was packed, in which shards, with checksums.

``OUT/manifest.json`` is written last by the converters, so its presence means
the folder is complete. It is parsed defensively: it is input, and a corrupt
one must give a clear error, never a crash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dataio.formats.errors import DataioError, ShardError
from dataio.formats.dataset.sample_fields import (FieldSpec, FieldsError, declared_columns, default_fields,
                                                  parse_fields)
from dataio.formats.dataset.sample_kind import SAMPLE_KINDS, inferred_kind
from dataio.formats.kinds import kind_problem
from dataio.formats.bounded_read import read_at_most
from dataio.formats.dataset.shard_patterns import is_pattern, no_manifest, pattern_refusal
from dataio.formats.files import sha256_file, write_atomic
from dataio.formats.limits import MAX_MANIFEST_BYTES
from dataio.formats.remote.storage import DEFAULT_TIMEOUT, Location, RetryPolicy, describe, open_location, remote_errors

MANIFEST_NAME = "manifest.json"
SAMPLE_TABLE_NAME = "samples.arrow"
FORMAT_VERSION = 1
# 2: an image folder's sample table may lack the label column (samples without a class: image-text pairs, boxes,
# views, packed since kinds were declared). A dataio from before reads version 1 only, so it refuses such a folder
# by its version in one line rather than as a damaged table ("column 'label' is missing").
VERSIONS = (1, 2)


def version_for(layout: str, fields: tuple[FieldSpec, ...]) -> int:
    """The format version a folder of ``layout`` declaring ``fields`` is written with: 2 when its sample table holds
    no label, else 1 (what every dataio reads)."""
    return 2 if layout == "images" and "label" not in declared_columns(fields) else FORMAT_VERSION


class ManifestError(DataioError):
    """The manifest is missing or malformed."""


@dataclass(frozen=True, kw_only=True)
class ShardEntry:
    """One shard file: its name, its DALI index (tar shards), sample count, size, sha256, tokens (text)."""

    file: str
    num_samples: int
    bytes: int
    sha256: str
    index: str = ""
    num_tokens: int = 0
    num_skipped: int = 0  # samples in the shard that are not indexed (tars adopted by `dataio index`)


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """Counts, classes and shards of one packed data set."""

    kind: str  # the layout: "images" (shards and a sample table) or "text" (token shards)
    num_samples: int
    shards: tuple[ShardEntry, ...]
    classes: tuple[str, ...] = ()
    num_rejected: int = 0
    sample_table: str = SAMPLE_TABLE_NAME
    options: dict[str, Any] = field(default_factory=dict)
    version: int = FORMAT_VERSION
    fields: tuple[FieldSpec, ...] = ()  # each sample's fields (sample_fields); () in folders packed before them
    sample_kind: str = ""  # the kind of sample (sample_kind.SAMPLE_KINDS); "" in folders packed before kinds

    def to_json(self) -> str:
        data = asdict(self)
        data["shards"] = [_without_zero_skipped(asdict(s)) for s in self.shards]
        data["classes"] = list(self.classes)
        data["fields"] = [f.to_dict() for f in self.fields]
        for key in ("fields", "sample_kind"):  # a folder packed before these were declared keeps its bytes (and
            if not data[key]:  # its fingerprint): the keys are left out when empty
                del data[key]
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    def sample_fields(self) -> tuple[FieldSpec, ...]:
        """The declared fields, or those of the folder's kind before fields were declared."""
        return self.fields or default_fields(self.kind, self.options)

    def declared_kind(self) -> str:
        """The kind of sample the folder holds: declared, or inferred once for older folders (``sample_kind``)."""
        return inferred_kind(self.kind, self.sample_kind, self.sample_fields())

    def predates_kinds(self) -> bool:
        """Whether the folder was packed before kinds were declared (its kind is then inferred, once)."""
        return not self.sample_kind

    def table_columns(self) -> frozenset[str]:
        """The sample-table columns its declared fields add (a reader accepts these beside its own)."""
        return declared_columns(self.sample_fields())

    def fingerprint(self) -> str:
        """A short hash of the manifest (shards, counts, checksums): which data set a loader state belongs to."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    def write(self, folder: str | Path) -> Path:
        """Write atomically (temp file, then rename) to ``folder/manifest.json``."""
        path = Path(folder) / MANIFEST_NAME
        write_atomic(path, self.to_json().encode())
        return path


def _without_zero_skipped(entry: dict[str, Any]) -> dict[str, Any]:
    """Shards written by the converters skip nothing: their manifests stay as before the field existed."""
    if entry["num_skipped"] == 0:
        del entry["num_skipped"]
    return entry


def _field(data: dict[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if name not in data:
        raise ManifestError(f"{where}: missing field {name!r}")
    value = data[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ManifestError(f"{where}: field {name!r} has type {type(value).__name__}")
    return value


def _optional(data: dict[str, Any], name: str, kind: type, default: Any) -> Any:
    """``data[name]`` if present with type ``kind``, else ``default``."""
    value = data.get(name, default)
    return value if isinstance(value, kind) and not isinstance(value, bool) else default


def _safe_name(name: str, where: str) -> str:
    """A file name, or ``FOLDER/NAME`` (a merged multi-node conversion's rank folder): never absolute,
    never upwards, never deeper."""
    parts = name.split("/") if isinstance(name, str) else []
    if not 1 <= len(parts) <= 2 or any(not p or p in (".", "..") or "\\" in p or "\x00" in p for p in parts):
        raise ManifestError(f"{where}: {name!r} is not a plain file name (or FOLDER/NAME)")
    return name


def parse_manifest(text: str, where: str = MANIFEST_NAME) -> Manifest:
    """Parse and validate manifest JSON; raises ManifestError naming the problem."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise ManifestError(f"{where}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{where}: top level is not an object")
    version = _field(data, "version", int, where)
    if version not in VERSIONS:
        raise ManifestError(f"{where}: unsupported version {version} (this dataio reads "
                            f"{' and '.join(map(str, VERSIONS))}; written by a newer dataio?)")
    shards = []
    for i, raw in enumerate(_field(data, "shards", list, where)):
        at = f"{where}: shards[{i}]"
        if not isinstance(raw, dict):
            raise ManifestError(f"{at} is not an object")
        entry = ShardEntry(
            file=_safe_name(_field(raw, "file", str, at), at),
            index=_safe_name(raw["index"], at) if _optional(raw, "index", str, "") else "",
            num_tokens=_optional(raw, "num_tokens", int, 0),
            num_skipped=_optional(raw, "num_skipped", int, 0),
            num_samples=_field(raw, "num_samples", int, at),
            bytes=_field(raw, "bytes", int, at),
            sha256=_field(raw, "sha256", str, at),
        )
        if entry.num_samples < 0 or entry.bytes < 0 or entry.num_skipped < 0:
            raise ManifestError(f"{at}: negative count")
        shards.append(entry)
    classes = _field(data, "classes", list, where) if "classes" in data else []
    if not all(isinstance(c, str) for c in classes):
        raise ManifestError(f"{where}: classes must be strings")
    manifest = Manifest(
        kind=_field(data, "kind", str, where),
        num_samples=_field(data, "num_samples", int, where),
        shards=tuple(shards),
        classes=tuple(classes),
        num_rejected=_optional(data, "num_rejected", int, 0),
        sample_table=_safe_name(table, where) if (table := _optional(data, "sample_table", str, SAMPLE_TABLE_NAME)) else "",
        options=data["options"] if isinstance(data.get("options"), dict) else {},
        fields=_fields(data, where),
        sample_kind=_sample_kind(data, where),
        version=version,
    )
    if sum(s.num_samples for s in manifest.shards) != manifest.num_samples:
        raise ManifestError(f"{where}: num_samples {manifest.num_samples} != sum over shards")
    contradiction = kind_problem(manifest)  # a kind no reader can read the folder as: named here, for every reader
    if contradiction:
        raise ManifestError(f"{where}: {contradiction}")
    return manifest


def _sample_kind(data: dict[str, Any], where: str) -> str:
    """The declared kind, one this dataio reads ("" when the manifest predates the key)."""
    if "sample_kind" not in data:
        return ""
    value = data["sample_kind"]
    if value not in SAMPLE_KINDS:
        shown = repr(value)[:40] if isinstance(value, str) else type(value).__name__
        raise ManifestError(f"{where}: sample_kind {shown} is not a kind this dataio reads ({', '.join(SAMPLE_KINDS)})")
    return value


def _fields(data: dict[str, Any], where: str) -> tuple[FieldSpec, ...]:
    try:
        return parse_fields(data["fields"], where) if "fields" in data else ()
    except FieldsError as e:
        raise ManifestError(str(e)) from None


def read_manifest(source: str | Path) -> tuple[Path, Manifest]:
    """Read the manifest of a shard folder (or a manifest path); returns (folder, manifest)."""
    path = Path(source)
    pattern = is_pattern(source) and not path.exists()
    if pattern:  # open_clip's DIR/{00000..00003}.tar: its folder, when it names every shard there
        path = path.parent
    if path.is_dir():
        path = path / MANIFEST_NAME
    if not path.is_file():
        raise ManifestError(no_manifest(path, source))
    if pattern:
        folder, manifest = read_manifest(path)
        refusal = pattern_refusal(source, folder, {entry.file for entry in manifest.shards})
        if refusal is not None:
            raise ManifestError(refusal)
        return folder, manifest
    try:
        text = read_at_most(path, MAX_MANIFEST_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:  # FileTooLarge is an OSError: its message says the size
        raise ManifestError(f"{path}: cannot read ({e})") from None
    return path.parent, parse_manifest(text, where=str(path))


def open_dataset(source: str | Path, storage_options: Mapping[str, Any] | None = None,
                 retry: RetryPolicy | None = None, timeout: float = DEFAULT_TIMEOUT) -> tuple[Location, Manifest]:
    """The location and manifest of a shard folder: a local path (as ``read_manifest``) or an fsspec URL.

    A remote manifest that cannot be read (missing, refused credentials,
    storage unreachable after the retries) raises ``ManifestError`` naming
    the URL without any credential.
    """
    location = open_location(source, storage_options, timeout)
    if not location.remote:
        folder, manifest = read_manifest(location.root)
        return Location(folder), manifest
    where = location.display(MANIFEST_NAME)
    try:
        data = location.read_bytes(MANIFEST_NAME, retry, limit=MAX_MANIFEST_BYTES)
    except FileNotFoundError:
        raise ManifestError(f"{where}: no manifest (is this a folder written by `dataio convert`?)") from None
    except remote_errors() as e:
        raise ManifestError(f"{where}: cannot read ({describe(e)})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ManifestError(f"{where}: cannot read ({e})") from None
    return location, parse_manifest(text, where=where)


def check_shard_file(path: Path, entry: ShardEntry, verify_checksum: bool = False) -> None:
    """Raise ``ShardError`` naming ``path`` if it is missing, not the manifest's size, or (with
    ``verify_checksum``) not its sha256."""
    if not path.is_file():
        raise ShardError(str(path), "missing")
    size = path.stat().st_size
    if size != entry.bytes:
        raise ShardError(str(path), f"size {size} bytes, manifest says {entry.bytes} (truncated or replaced)")
    if verify_checksum and sha256_file(path) != entry.sha256:
        raise ShardError(str(path), "sha256 does not match the manifest")
