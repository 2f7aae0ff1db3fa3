"""``dataio verify OUT``: check a shard folder against its manifest, naming every problem.

Per shard: present, size and sha256 as the manifest records them, and
readable with the recorded sample count (tar members, or Arrow rows). With
``deep``, every image is decoded (through the sample table) and every token
id checked against the vocabulary. Nothing is extracted or unpickled: tar
members are only listed, whatever their names.
"""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from PIL import Image

from dataio.formats.errors import DataioError, ShardError
from dataio.formats.limits import MAX_PIXELS
from dataio.formats.manifest import Manifest, check_shard_file, read_manifest
from dataio.formats.sample_table import read_sample_table


@dataclass
class VerifyReport:
    """Problems found, each naming its shard (and sample), plus counts of what was checked."""

    folder: Path
    problems: list[str] = field(default_factory=list)
    shards_checked: int = 0
    samples_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def line(self) -> str:
        verdict = "OK" if self.ok else f"{len(self.problems)} problem(s)"
        return f"verify {self.folder}: {self.shards_checked} shards, {self.samples_checked} samples decoded: {verdict}"


def count_tar_samples(path: Path) -> int:
    """Number of sample keys among a tar's regular members; raises DataioError if it is not a whole tar."""
    keys = set()
    try:
        with tarfile.open(path, "r:") as tar:
            for member in tar:  # listed only: nothing is ever extracted
                if member.isreg() and "." in member.name.rsplit("/", 1)[-1]:
                    keys.add(member.name.split(".", 1)[0])
    except (tarfile.TarError, OSError, EOFError, ValueError) as e:
        raise DataioError(f"not a readable tar ({type(e).__name__}: {e})") from None
    return len(keys)


def _count_arrow_rows(path: Path) -> int:
    try:
        reader = pa.ipc.open_file(pa.memory_map(str(path), "r"))
        rows = 0
        for i in range(reader.num_record_batches):
            batch = reader.get_batch(i)
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
    if count != entry.num_samples:
        return f"shard {path}: {count} samples, manifest says {entry.num_samples}", False
    try:
        check_shard_file(path, entry, verify_checksum=True)
    except ShardError as e:
        return str(e), True
    return None, True


def _decode_images(folder: Path, manifest: Manifest, bad_shards: set[int], report: VerifyReport) -> None:
    table = read_sample_table(folder / manifest.sample_table)
    files = {}
    try:
        for sample in range(len(table)):
            shard = int(table.shard[sample])
            if shard in bad_shards or shard >= len(manifest.shards):
                continue
            name = manifest.shards[shard].file
            if shard not in files:
                files[shard] = open(folder / name, "rb")
            handle = files[shard]
            handle.seek(int(table.offset[sample]))
            data = handle.read(int(table.size[sample]))
            try:
                with Image.open(io.BytesIO(data)) as image:
                    if image.size[0] * image.size[1] > MAX_PIXELS:
                        raise ValueError(f"header claims {image.size[0]}x{image.size[1]} pixels")
                    image.convert("RGB").load()
                report.samples_checked += 1
            except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError) as e:
                report.problems.append(f"sample {table.key(sample)!r} in shard {name}: "
                                       f"cannot decode ({type(e).__name__}: {e})")
    finally:
        for handle in files.values():
            handle.close()


def _check_tokens(folder: Path, manifest: Manifest, bad_shards: set[int], report: VerifyReport) -> None:
    vocab = int(manifest.options.get("tokenizer", {}).get("vocab_size", 0))
    for index, entry in enumerate(manifest.shards):
        if index in bad_shards or not entry.file.endswith(".arrow"):
            continue
        table = pa.ipc.open_file(pa.memory_map(str(folder / entry.file), "r")).read_all()
        ids = pc.list_flatten(table.column("input_ids"))
        largest = pc.max(ids).as_py()
        if vocab and largest is not None and largest >= vocab:
            report.problems.append(f"shard {entry.file}: token id {largest} >= vocabulary size {vocab}")
        report.samples_checked += table.num_rows


def verify(folder: str | Path, *, deep: bool = False) -> VerifyReport:
    """Check ``folder`` against its manifest; the report lists every problem found."""
    folder, manifest = read_manifest(folder)
    report = VerifyReport(folder)
    bad = set()
    for index in range(len(manifest.shards)):
        problem, decodable = _check_shard(folder, manifest, index)
        report.shards_checked += 1
        if problem:
            report.problems.append(problem)
        if not decodable:
            bad.add(index)
    if deep:
        if manifest.kind == "images":
            _decode_images(folder, manifest, bad, report)
        elif manifest.kind == "text":
            _check_tokens(folder, manifest, bad, report)
    return report
