"""``dataio verify OUT``: check a shard folder against its manifest, naming every problem.

Per shard: present, size and sha256 as the manifest records them, and
readable with the recorded sample count (tar members, or Arrow rows). The
sample table: its rows against the manifest, against each other (no two
read the same bytes) and against the shards' members (each row points at its
own image member), and the class list against its labels. With
``deep``, every image is decoded (through the sample table). Nothing is
extracted or unpickled: tar members are only listed, whatever their names.

What only a kind of sample has is checked by that kind, found by name in the
table of kinds (``dataio.formats.kinds``, from the kind the manifest declares):
its ``check`` part says whether its own columns read as declared (a pair
folder's captions, ids and tokenizer record: also what the loaders ask when a
folder is opened), its ``verify`` part checks its rows and members
(``verify_context``: the classes' ``.cls`` members, the caption ids against the
vocabulary, COCO's box targets, a token folder's ids with ``deep``).
"""

from __future__ import annotations

import io
import tempfile
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from PIL import Image

from dataio.formats.errors import DataioError, ShardError
from dataio.formats.kinds import kind_of
from dataio.formats.limits import MAX_PIXELS
from dataio.formats.dataset.class_list import class_list_problem
from dataio.formats.dataset.manifest import MANIFEST_NAME, Manifest, check_shard_file, open_dataset
from dataio.formats.dataset.remote_copy import copy_dataset
from dataio.formats.dataset.verify_context import VerifyContext, VerifyReport, arrow_batches
from dataio.formats.remote.storage import DEFAULT_TIMEOUT, Location, RetryPolicy
from dataio.formats.files import sha256_file
from dataio.formats.file_gate import open_input
from dataio.formats.dataset.sample_table import (LABEL_FIELD, SampleTable, read_sample_table, sample_checksum,
                                                 table_faults)
from dataio.formats.dataset.table_members import member_faults

__all__ = ["VerifyReport", "count_tar_samples", "verify"]


def count_tar_samples(path: Path) -> int:
    """Number of sample keys among a tar's regular members; raises DataioError if it is not a whole tar."""
    keys = set()
    try:
        with open_input(path) as file, tarfile.open(fileobj=file, mode="r:") as tar:
            for member in tar:  # listed only: nothing is ever extracted
                if member.isreg() and "." in member.name.rsplit("/", 1)[-1]:
                    keys.add(member.name.split(".", 1)[0])
    except (tarfile.TarError, OSError, EOFError, ValueError) as e:
        raise DataioError(f"not a readable tar ({type(e).__name__}: {e})") from None
    return len(keys)


def _count_arrow_rows(path: Path) -> int:
    try:
        rows = 0
        for batch in arrow_batches(path):
            batch.validate(full=True)
            rows += batch.num_rows
        return rows
    except (pa.ArrowException, OSError) as e:
        raise DataioError(f"not a readable Arrow file ({e})") from None


def _check_shard(folder: Path, manifest: Manifest, index: int) -> tuple[str | None, bool]:
    """``(problem or None, decodable)``: a shard that is whole but changed (sha256) is still decoded,
    to name its bad samples."""
    entry = manifest.shards[index]
    path = folder / entry.file
    try:
        check_shard_file(path, entry)
        count = _count_arrow_rows(path) if path.suffix == ".arrow" else count_tar_samples(path)
    except ShardError as e:
        return str(e), False
    except DataioError as e:
        return f"shard {path}: {e}", False
    if count != entry.num_samples + entry.num_skipped:
        return f"shard {path}: {count} samples, manifest says {entry.num_samples + entry.num_skipped}", False
    try:
        check_shard_file(path, entry, verify_checksum=True)
    except ShardError as e:
        return str(e), True
    return None, True


def _check_table(folder: Path, manifest: Manifest, report: VerifyReport) -> tuple[SampleTable | None, dict[int, str]]:
    """The sample table, if readable, and its rows that disagree with the manifest (each reported)."""
    try:
        table = read_sample_table(folder / manifest.sample_table, declared=manifest.table_columns())
    except DataioError as e:
        report.problems.append(str(e))
        return None, {}
    if len(table) != manifest.num_samples:
        report.problems.append(f"{manifest.sample_table}: {len(table)} rows, manifest says {manifest.num_samples}")
    labelled = table.label is not None and LABEL_FIELD.name in manifest.table_columns()  # a declared class label
    short = labelled and class_list_problem(manifest.classes, table.label, str(folder / MANIFEST_NAME))
    if short:  # one line for the manifest, not one per row past its class list
        report.problems.append(short)
    faults = table_faults(table, [s.bytes for s in manifest.shards], 0 if short else len(manifest.classes))
    undeclared = LABEL_FIELD.name in table.table.schema.names and LABEL_FIELD.name not in manifest.table_columns()
    if undeclared and not manifest.predates_kinds():  # a folder that declares its kind declares its columns (older ones: -1s)
        report.problems.append(f"{manifest.sample_table}: a 'label' column the manifest does not declare (its kind, "
                               f"{manifest.sample_kind}, has no classes)")
    check = kind_of(manifest).part("check")  # the kind's own columns (pairs: text, ids, tokenizer record)
    problem = check(manifest, table.table) if check is not None else None
    if problem:
        report.problems.append(f"{manifest.sample_table}: {problem}")
    for row, reason in sorted(faults.items()):
        report.problems.append(f"sample {table.key(row)!r} in {manifest.sample_table}: {reason}")
    return table, faults


def _check_members(folder: Path, manifest: Manifest, table: SampleTable, faults: dict[int, str], bad_shards: set[int],
                   report: VerifyReport) -> None:
    """Rows that do not point at their own image member (``table_members``), added to ``faults`` and reported."""
    for row, reason in sorted(member_faults(folder, manifest, table, faults, bad_shards).items()):
        faults[row] = reason
        report.problems.append(f"sample {table.key(row)!r} in {manifest.sample_table}: {reason}")


def _check_tokenizer(folder: Path, manifest: Manifest, report: VerifyReport) -> None:
    """The tokenizer file against the sha256 the manifest records for it."""
    tokenizer = manifest.options.get("tokenizer")
    if not isinstance(tokenizer, dict) or not isinstance(tokenizer.get("file"), str):
        return
    path = folder / Path(tokenizer["file"]).name
    if not path.is_file():
        report.problems.append(f"tokenizer {path}: missing")
    elif sha256_file(path) != tokenizer.get("sha256"):
        report.problems.append(f"tokenizer {path}: sha256 does not match the manifest")


def _decode_images(folder: Path, manifest: Manifest, table: SampleTable, faults: dict[int, str],
                   bad_shards: set[int], report: VerifyReport) -> None:
    """Decode every image and check its checksum and its size against the table's."""
    files = {}
    try:
        for sample in range(len(table)):
            shard = int(table.shard[sample])
            if shard in bad_shards or sample in faults:
                continue
            name = manifest.shards[shard].file
            if shard not in files:
                files[shard] = open_input(folder / name)
            handle = files[shard]
            handle.seek(int(table.offset[sample]))
            data = handle.read(int(table.size[sample]))
            key = table.key(sample)
            if table.checksum is not None and sample_checksum(data) != int(table.checksum[sample]):
                report.problems.append(f"sample {key!r} in shard {name}: checksum mismatch (damaged bytes)")
            try:
                with Image.open(io.BytesIO(data)) as image:
                    if image.size[0] * image.size[1] > MAX_PIXELS:
                        raise ValueError(f"header claims {image.size[0]}x{image.size[1]} pixels")
                    image.convert("RGB").load()
                    table_size = (int(table.width[sample]), int(table.height[sample]))
                if image.size != table_size:  # the loader crops (and maps box targets) in the table's size
                    report.problems.append(f"sample {key!r} in shard {name}: the sample table gives its size as "
                                           f"{table_size[0]}x{table_size[1]}, the image is "
                                           f"{image.size[0]}x{image.size[1]}")
                report.samples_checked += 1
            except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError) as e:
                report.problems.append(f"sample {table.key(sample)!r} in shard {name}: "
                                       f"cannot decode ({type(e).__name__}: {e})")
    finally:
        for handle in files.values():
            handle.close()


def verify(folder: str | Path, *, deep: bool = False, storage_options: Mapping[str, Any] | None = None,
           retry: RetryPolicy | None = None, timeout: float = DEFAULT_TIMEOUT) -> VerifyReport:
    """Check ``folder`` (a local path or an fsspec URL) against its manifest; the report lists every problem.

    A remote data set is copied whole into a temporary folder first (every
    shard's sha256 needs every byte anyway) and the report names its URLs;
    each request waits at most ``timeout`` seconds to connect or for its next
    bytes (``dataio.formats.remote.storage.bounded_options``).
    """
    location, manifest = open_dataset(folder, storage_options, retry, timeout)
    if location.remote:
        return _verify_remote(location, manifest, deep, retry or RetryPolicy())
    return _verify_local(location.root, manifest, deep)


def _verify_remote(location: Location, manifest: Manifest, deep: bool, retry: RetryPolicy) -> VerifyReport:
    with tempfile.TemporaryDirectory(prefix="dataio-verify-") as tmp:
        missing = copy_dataset(location, manifest, Path(tmp), retry, strict=False)
        local = _verify_local(Path(tmp), manifest, deep)
    report = VerifyReport(location.display(), shards_checked=local.shards_checked,
                          samples_checked=local.samples_checked)
    # the local copy's paths become the URLs they came from (a missing file is named once, by the local check)
    report.problems = [problem.replace(tmp, location.display()) for problem in local.problems]
    report.problems += [f"{location.display(name)}: missing" for name in missing
                        if not any(name in p for p in report.problems)]
    return report


def _verify_local(folder: Path, manifest: Manifest, deep: bool) -> VerifyReport:
    report = VerifyReport(folder)
    if manifest.num_samples == 0:  # what a conversion of nothing leaves: not a data set to train on
        rejected = folder / "rejected.jsonl"
        report.problems.append(f"{folder}: holds no samples (its manifest lists 0): nothing was converted or indexed"
                               + (f"; the rejected inputs are listed in {rejected}" if rejected.is_file() else ""))
    bad = set()
    for index in range(len(manifest.shards)):
        problem, decodable = _check_shard(folder, manifest, index)
        report.shards_checked += 1
        if problem:
            report.problems.append(problem)
        if not decodable:
            bad.add(index)
    # the layout: image shards have a sample table (token shards have none)
    table, faults = _check_table(folder, manifest, report) if manifest.kind == "images" else (None, {})
    if table is not None:
        _check_members(folder, manifest, table, faults, bad, report)
    own = kind_of(manifest).part("verify")  # the kind's rows and members: box targets, caption ids, .cls, tokens
    if own is not None:
        own(VerifyContext(folder, manifest, table, faults, bad, deep, report))
    _check_tokenizer(folder, manifest, report)  # text, and image-text pairs packed with a tokenizer
    if deep and table is not None:
        _decode_images(folder, manifest, table, faults, bad, report)
    return report
