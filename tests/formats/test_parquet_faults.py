"""Hub Parquet under faults (issue 25): an absurd label is one rejected row (§6); damaged row groups and files are
named in plain text and the rest converts (§5)."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq

from tests.formats.test_parquet_images import _jpeg, _write


def test_absurd_label_without_class_names_is_one_rejected_row(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rows = [(_jpeg(i % 3, i), i % 3, f"img{i}.JPEG") for i in range(6)]
    rows[3] = (_jpeg(0, 3), 10**12, "absurd.JPEG")
    _write(data / "train-00000-of-00001.parquet", rows, features=False)
    out = tmp_path / "out"
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "
            "from dataio.cli import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", code, "convert", "images", str(data), str(out), "--workers", "1",
                           "--no-progress"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["num_samples"] == 5 and manifest["classes"] == ["0", "1", "2"]
    (rejected,) = [json.loads(line) for line in (out / "rejected.jsonl").read_text().splitlines()]
    assert rejected["path"].endswith("#3") and str(10**12) in rejected["reason"]


def _damage_row_group(path, group: int, column: int = 0) -> None:
    """Overwrite the page header of one column chunk of ``group`` with garbage (a flipped disk block)."""
    chunk = pq.ParquetFile(path).metadata.row_group(group).column(column)
    data = bytearray(path.read_bytes())
    offset = chunk.data_page_offset
    data[offset:offset + 24] = bytes([0x0F] * 24)
    path.write_bytes(bytes(data))


def _hub_files(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rows = [(_jpeg(i % 3, i), i % 3, f"img{i}.JPEG") for i in range(12)]  # 3 row groups of 4 rows
    _write(data / "train-00000-of-00003.parquet", rows)
    _write(data / "train-00001-of-00003.parquet", rows[:8])
    _write(data / "train-00002-of-00003.parquet", rows[:4])
    return data


def _convert(data, out, *flags):
    return subprocess.run([sys.executable, "-m", "dataio", "convert", "images", str(data), str(out), "--workers", "2",
                           "--no-progress", *flags], capture_output=True, text=True, timeout=300)


def test_a_damaged_row_group_is_named_and_the_rest_converts(tmp_path):
    """Issue 25 §5: the file and row group in plain text, its rows listed, the other groups and files converted."""
    data = _hub_files(tmp_path)
    _damage_row_group(data / "train-00000-of-00003.parquet", 1)  # image bytes of rows 4-7
    _damage_row_group(data / "train-00001-of-00003.parquet", 0, column=1)  # the labels of rows 0-3
    footer = data / "train-00002-of-00003.parquet"
    footer.write_bytes(footer.read_bytes()[:-12])  # a file whose footer is gone
    done = _convert(data, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert all(ch >= " " for line in done.stderr.splitlines() for ch in line)  # no raw control bytes
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["num_samples"] == 12 - 4 + 8 - 4
    rejected = {r["path"]: r["reason"] for r in map(json.loads, (tmp_path / "out" / "rejected.jsonl").read_text()
                                                    .splitlines())}
    first = [f"train-00000-of-00003.parquet#{i}" for i in range(4, 8)]
    second = [f"train-00001-of-00003.parquet#{i}" for i in range(0, 4)]
    assert set(rejected) == {*first, *second, "train-00002-of-00003.parquet"}
    assert all("row group 1 (rows 4-7) is damaged" in rejected[r] for r in first)
    assert all("row group 0 (rows 0-3) is damaged" in rejected[r] for r in second)
    assert "not a readable Parquet file" in rejected["train-00002-of-00003.parquet"]
    assert all(ch >= " " for reason in rejected.values() for ch in reason)
    strict = _convert(data, tmp_path / "strict", "--strict")
    assert strict.returncode == 1


def test_damaged_parquet_on_two_ranks_converts_the_rest(tmp_path):
    data = _hub_files(tmp_path)
    _damage_row_group(data / "train-00000-of-00003.parquet", 2)
    footer = data / "train-00002-of-00003.parquet"
    footer.write_bytes(footer.read_bytes()[:-12])
    for rank in range(2):
        done = _convert(data, tmp_path / "out", "--rank", str(rank), "--world-size", "2")
        assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["num_samples"] == 12 - 4 + 8


def test_a_footer_whose_column_names_are_not_utf8_is_one_rejected_file(tmp_path):
    """A footer naming a column in bytes that are not UTF-8: pyarrow's ParquetFile raised UnicodeDecodeError, a
    traceback out of ``dataio convert images`` (found by tests/test_fuzz.py); now that file is one rejected row."""
    import pyarrow as pa

    data = tmp_path / "data"
    data.mkdir()
    _write(data / "train-00000-of-00002.parquet", [(_jpeg(i % 3, i), i % 3, f"img{i}.JPEG") for i in range(6)])
    bad = data / "train-00001-of-00002.parquet"
    table = pa.table({"image": pa.array([{"bytes": _jpeg(0, 9), "path": "x.JPEG"}]), "label": pa.array([0]),
                      "not\u00e9": pa.array([1])})
    pq.write_table(table, bad)
    raw = bytearray(bad.read_bytes())
    footer = int.from_bytes(raw[-8:-4], "little")
    start = len(raw) - 8 - footer
    raw[start:-8] = raw[start:-8].replace("not\u00e9".encode(), b"not\xe9\xa9")  # same length, invalid UTF-8
    bad.write_bytes(bytes(raw))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "dataio", "convert", "images", str(data), str(out), "--workers", "1",
                           "--no-progress"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert json.loads((out / "manifest.json").read_text())["num_samples"] == 6
    (rejected,) = [json.loads(line) for line in (out / "rejected.jsonl").read_text().splitlines()]
    assert "train-00001-of-00002.parquet" in rejected["path"]


def test_convert_images_on_a_parquet_with_deeply_nested_metadata_is_one_line(tmp_path):
    """The schema's 'huggingface' metadata nesting 200000 lists (400 KB): a RecursionError traceback escaped from
    json.loads; now one line naming the file (its class names cannot be read), exit 1, nothing packed."""
    data = tmp_path / "data"
    data.mkdir()
    path = data / "train-00000-of-00001.parquet"
    _write(path, [(_jpeg(i % 3, i), i % 3, f"img{i}.JPEG") for i in range(3)], features=False)
    table = pq.read_table(path)
    nested = b'{"info": {"features": ' + b"[" * 200_000 + b"]" * 200_000 + b"}}"
    pq.write_table(table.replace_schema_metadata({b"huggingface": nested}), path)
    done = subprocess.run([sys.executable, "-m", "dataio", "convert", "images", str(data), str(tmp_path / "out"),
                           "--workers", "1", "--no-progress"], capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-1500:]
    assert path.name in lines[0] and "nests too deep" in lines[0]
    assert not (tmp_path / "out" / "manifest.json").exists()
