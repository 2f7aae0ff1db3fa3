"""``dataio verify`` over a keypoints folder checks its points as it checks boxes: 3 x K values a box (K the
manifest's names), finite, visibility 0, 1 or 2; each damaged row named with its key and reason, exit 1 (the
keypoints column went unread: a damaged one passed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table, write_sample_table

ROOT = Path(__file__).resolve().parents[2]


def verify_cli(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dataio", "verify", str(folder)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_verify_names_rows_whose_keypoints_are_damaged(keypoint_shards, tmp_path) -> None:
    assert verify_cli(keypoint_shards).returncode == 0
    out = tmp_path / "out"
    out.mkdir()
    for path in keypoint_shards.iterdir():
        (out / path.name).write_bytes(path.read_bytes())
    table = read_sample_table(out / "samples.arrow", declared=read_manifest(out)[1].table_columns()).table
    points = table.column("keypoints").to_pylist()
    rows = [row for row, values in enumerate(points) if values][:3]
    points[rows[0]] = points[rows[0]][:-3]  # one point short of 3 x 5 a box
    points[rows[1]][0] = float("nan")
    points[rows[2]][2] = 3.0  # visibility 3
    columns = {name: table.column(name) for name in table.schema.names}
    columns["keypoints"] = pa.array(points, table.schema.field("keypoints").type)
    write_sample_table(out / "samples.arrow", columns)
    done = verify_cli(out)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    report = done.stdout + done.stderr
    keys = table.column("key").to_pylist()
    assert keys[rows[0]] in report and "keypoint values (3 x 5 a box)" in report, report
    assert keys[rows[1]] in report and "its keypoints are not all finite numbers" in report, report
    assert keys[rows[2]] in report and "keypoint 0's visibility 3 is not 0, 1 or 2" in report, report
