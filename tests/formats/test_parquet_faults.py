"""Hub Parquet under faults (issue 25): an absurd label is one rejected row (§6)."""

from __future__ import annotations

import json
import subprocess
import sys

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
