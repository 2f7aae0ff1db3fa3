"""``dataio bench pairs`` with webdataset 0.2.86 (the floor dataio declares, and the only version
``open_clip_torch[training]`` shares with it) first on PYTHONPATH: its open_clip baseline builds ``WebDataset`` with the
keywords that version takes (it had no ``empty_check``: the run stopped with a TypeError)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FLOOR = Path(sys.prefix) / "clients-wds0286"


def test_bench_pairs_runs_with_webdataset_0_2_86(tmp_path):
    if not (FLOOR / "webdataset").is_dir():
        pytest.fail(f"{FLOOR} holds no webdataset: `make venv` installs webdataset==0.2.86 there")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FLOOR), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    version = subprocess.run([sys.executable, "-c", "import webdataset; print(webdataset.__version__)"], env=env,
                             capture_output=True, text=True, cwd=tmp_path)
    assert version.stdout.strip() == "0.2.86", version.stderr
    args = [sys.executable, "-m", "dataio", "bench", "pairs", str(tmp_path / "tars"), "--photos", "16", "--photo-class",
            "tiny", "--out", str(tmp_path / "out"), "--batch-size", "4", "--image-size", "32", "--workers", "2",
            "--epochs", "1", "--warmup", "0", "--vocab-size", "300"]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads((tmp_path / "out" / "pairs.json").read_text())["rows"]
    assert [row["loader"] for row in rows] == ["open_clip", "dataio", "dataio_tokenize"]
    assert all(row["pairs_per_epoch"] == [16] for row in rows)
