"""The gate's writes (issue 42, class 1): a link planted where ``dataio train --out`` or ``dataio convert coco``
writes (its lock, its journal, log.json, log.csv, the checkpoint, the manifest) leaves its target untouched, and
the command refuses in one line (the CLI as a user runs it: exit code and stderr)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ["--image-size", "32", "--batch-size", "8", "--epochs", "1", "--workers", "1"]


def dataio(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dataio", *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1", "DATAIO_NUM_WORKERS": "1"})


def refused_in_one_line(done: subprocess.CompletedProcess, planted: Path) -> str:
    err = done.stderr.strip()
    assert done.returncode in (1, 2), (done.returncode, err[-2000:])
    assert "Traceback" not in err and len(err.splitlines()) == 1, err[-2000:]
    assert str(planted) in err and "link" in err, err
    return err


def plant(tmp_path: Path, out: Path, name: str) -> Path:
    """A link ``out/name`` to a file (or, for the journal, a folder) of the user's outside ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    if name == ".journal":
        target = tmp_path / "elsewhere"
        target.mkdir()
    else:
        target = tmp_path / "precious.txt"
        target.write_text("precious\n")
    os.symlink(target, out / name)
    return target


def untouched(target: Path) -> bool:
    return sorted(target.iterdir()) == [] if target.is_dir() else target.read_bytes() == b"precious\n"


@pytest.mark.parametrize("name", [".dataio.lock", "log.json", "log.csv", "checkpoint.pt", "train.png"])
def test_a_link_planted_in_train_out_is_refused_and_its_target_untouched(coloured_shards, tmp_path, name):
    """Before: log.json, log.csv and the checkpoint were renamed over the planted link without a word, and
    matplotlib's ``savefig(path)`` wrote train.png through it."""
    out = tmp_path / "run"
    target = plant(tmp_path, out, name)
    done = dataio("train", "--train", str(coloured_shards), "--out", str(out), *TRAIN)
    refused_in_one_line(done, out / name)
    assert untouched(target)


def test_a_link_planted_as_the_profile_traces_temp_file_leaves_its_target_untouched(coloured_shards, tmp_path):
    """Before: torch exported the trace to the fixed name ``rank0.pt.trace.json.partial``, through a link planted
    there; now it writes in a folder the gate has just made (random name, 0700), and the trace is moved into place."""
    out = tmp_path / "run"
    target = plant(tmp_path, out / "profile", "rank0.pt.trace.json.partial")
    done = dataio("train", "--train", str(coloured_shards), "--out", str(out), *TRAIN, "--profile", "2")
    assert done.returncode == 0, done.stderr[-2000:]
    assert untouched(target)
    assert "traceEvents" in json.loads((out / "profile" / "rank0.pt.trace.json").read_text())
    assert sorted(p.name for p in (out / "profile").iterdir()) == ["rank0.pt.trace.json", "rank0.pt.trace.json.partial"]


@pytest.mark.parametrize("name", [".dataio.lock", ".journal", "manifest.json", "samples.arrow", "rejected.jsonl"])
def test_a_link_planted_in_coco_out_is_refused_and_its_target_untouched(coco_folder, tmp_path, name):
    out = tmp_path / "out"
    target = plant(tmp_path, out, name)
    done = dataio("convert", "coco", str(coco_folder[0]), str(coco_folder[1]), str(out), "--no-progress",
                  "--workers", "1")
    assert done.returncode in (1, 2) and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert untouched(target)
