"""Sample tables that lie: rows reading another sample's bytes, a class list emptied or cut short, a column of the
wrong type. Each is named in one line by the loader (at open, or per sample) and by ``dataio verify``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from dataio import ImageLoader, ShardDataset
from dataio.errors import DataioError, SampleError
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import SCHEMA_WITH_CHECKSUM
from dataio.formats.dataset.wds_shards import scan_tar

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dataio", *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)


def _copy(shards: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(shards, out)
    return out


def _columns(out: Path) -> tuple[Path, dict[str, list]]:
    _, manifest = read_manifest(out)
    path = out / manifest.sample_table
    return path, pa.ipc.open_file(pa.BufferReader(path.read_bytes())).read_all().to_pydict()


def _write(path: Path, columns: dict[str, list], schema: pa.Schema = SCHEMA_WITH_CHECKSUM) -> None:
    table = pa.Table.from_pydict(columns, schema=schema)
    with pa.ipc.new_file(str(path), table.schema) as writer:
        writer.write_table(table)


def _point(columns: dict[str, list], row: int, at: int) -> None:
    """Row ``row`` reads what row ``at`` reads: offset, size and checksum copied, so no checksum catches it."""
    for name in ("shard", "offset", "size", "xxh3"):
        columns[name][row] = columns[name][at]


def test_a_row_reading_another_samples_bytes_is_named_by_the_loader_and_verify(image_shards, tmp_path):
    out = _copy(image_shards, tmp_path)
    path, columns = _columns(out)
    _point(columns, 1, 0)
    _write(path, columns)
    first, second = columns["key"][0], columns["key"][1]
    loader = ImageLoader(out, batch_size=8, image_size=32, on_error="skip")
    total = sum(len(labels) for _, labels in loader)
    assert sorted(e["key"] for e in loader.stats.errors) == sorted([first, second])
    assert all("overlap those of sample" in e["reason"] for e in loader.stats.errors)
    assert total == len(columns["key"]) - 2  # either row may be the wrong one: both are left out
    with pytest.raises(SampleError, match="two rows read the same image"):
        list(ImageLoader(out, batch_size=8, image_size=32))
    done = cli("verify", str(out), "--deep")
    assert done.returncode == 1, done.stdout
    assert f"sample {second!r} in samples.arrow: bytes" in done.stderr and f"sample {first!r}" in done.stderr
    assert "Traceback" not in done.stderr


def test_rows_that_swapped_members_are_named_by_verify(image_shards, tmp_path):
    """No two rows overlap, every checksum matches its bytes, every image decodes: only the tar headers tell."""
    out = _copy(image_shards, tmp_path)
    path, columns = _columns(out)
    saved = {name: columns[name][0] for name in ("shard", "offset", "size", "xxh3")}
    _point(columns, 0, 1)
    for name, value in saved.items():
        columns[name][1] = value
    _write(path, columns)
    assert cli("verify", str(image_shards), "--deep").returncode == 0
    done = cli("verify", str(out))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines == [f"sample {columns['key'][0]!r} in samples.arrow: bytes {columns['offset'][0]}+{columns['size'][0]}"
                     f" are member '{columns['key'][1]}.jpg', another sample's",
                     f"sample {columns['key'][1]!r} in samples.arrow: bytes {columns['offset'][1]}+{columns['size'][1]}"
                     f" are member '{columns['key'][0]}.jpg', another sample's"]


def test_a_row_pointing_at_its_label_member_is_named_by_verify(image_shards, tmp_path):
    out = _copy(image_shards, tmp_path)
    path, columns = _columns(out)
    _, manifest = read_manifest(out)
    label = next(m for sample in scan_tar(out / manifest.shards[0].file) for m in sample
                 if m.key == columns["key"][0] and m.extension == "cls")
    columns["offset"][0], columns["size"][0] = label.offset, label.size
    _write(path, columns)
    done = cli("verify", str(out))
    assert done.returncode == 1
    assert f"are member '{columns['key'][0]}.cls', not an image" in done.stderr


def _set_classes(out: Path, classes: list[str]) -> Path:
    path = out / "manifest.json"
    data = json.loads(path.read_text())
    data["classes"] = classes
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("keep", [0, 2], ids=["emptied", "short"])
def test_an_emptied_or_short_class_list_is_refused_at_open(image_shards, tmp_path, keep):
    out = _copy(image_shards, tmp_path)
    _, manifest = read_manifest(out)
    assert len(manifest.classes) == 3
    manifest_path = _set_classes(out, list(manifest.classes[:keep]))
    expected = "the class list was emptied" if keep == 0 else "the class list is short"
    for build in (lambda: ImageLoader(out, batch_size=8, image_size=32, on_error="skip"), lambda: ShardDataset(out)):
        with pytest.raises(DataioError, match=expected) as caught:
            build()
        assert str(caught.value).startswith(f"{manifest_path}: lists {keep or 'no'} classes")
    done = cli("verify", str(out))
    assert done.returncode == 1 and done.stderr.strip().splitlines() == [str(caught.value)]
    done = cli("train", "--train", str(out), "--epochs", "1", "--image-size", "32", "--batch-size", "8",
               "--workers", "1", "--out", str(tmp_path / "run"))
    assert done.returncode == 1 and "Traceback" not in done.stderr and expected in done.stderr


def test_a_few_damaged_labels_stay_per_sample_faults(image_shards, tmp_path):
    """Labels past the list that do not run on from its end are damaged rows, not a short list."""
    out = _copy(image_shards, tmp_path)
    path, columns = _columns(out)
    columns["label"][0] = 4  # 3 classes: label 3 is not used, so the list is not short
    _write(path, columns)
    loader = ImageLoader(out, batch_size=8, image_size=32, on_error="skip")
    assert sum(len(labels) for _, labels in loader) == len(columns["key"]) - 1
    assert [e["key"] for e in loader.stats.errors] == [columns["key"][0]]


def test_a_column_of_the_wrong_type_is_named_in_one_line(image_shards, tmp_path):
    out = _copy(image_shards, tmp_path)
    path, columns = _columns(out)
    schema = SCHEMA_WITH_CHECKSUM.set(SCHEMA_WITH_CHECKSUM.get_field_index("label"), pa.field("label", pa.int64()))
    _write(path, columns, schema)
    with pytest.raises(DataioError, match="sample table column 'label' has type int64, expected int32"):
        ImageLoader(out, batch_size=8, image_size=32)
    done = cli("verify", str(out))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"{path}: sample table column 'label' has type int64, expected int32"]
