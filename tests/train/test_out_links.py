"""Links planted where ``dataio train --out`` writes, beyond the files docs/reliability.md lists: the folders it
writes into (``profile``, ``tensorboard``) and its write probe (``.write-test-PID``). The CLI as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ["--image-size", "32", "--batch-size", "8", "--epochs", "1", "--workers", "1"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "DATAIO_NUM_WORKERS": "1"}


def dataio(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dataio", *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env=ENV)


def _refused_or_untouched(done: subprocess.CompletedProcess, victim: Path) -> None:
    assert sorted(p.name for p in victim.iterdir()) == [], (
        f"dataio wrote through the planted link into {victim}: {sorted(p.name for p in victim.iterdir())}")
    if done.returncode != 0:
        err = done.stderr.strip()
        assert "Traceback" not in err and len(err.splitlines()) == 1 and "link" in err, err[-2000:]


def test_a_link_planted_as_the_profile_folder_is_not_written_through(coloured_shards, tmp_path):
    # Now: the trace (and the gate's private temp folder) land in the link's target, a folder of the user's.
    out, victim = tmp_path / "run", tmp_path / "victim"
    out.mkdir()
    victim.mkdir()
    os.symlink(victim, out / "profile")
    done = dataio("train", "--train", str(coloured_shards), "--out", str(out), *TRAIN, "--profile", "2")
    _refused_or_untouched(done, victim)


def test_a_link_planted_as_the_tensorboard_folder_is_not_written_through(coloured_shards, tmp_path):
    # Now: tensorboard's event file is written into the link's target.
    out, victim = tmp_path / "run", tmp_path / "victim"
    out.mkdir()
    victim.mkdir()
    os.symlink(victim, out / "tensorboard")
    done = dataio("train", "--train", str(coloured_shards), "--out", str(out), *TRAIN, "--tensorboard")
    _refused_or_untouched(done, victim)


def test_the_write_probe_of_train_out_does_not_follow_a_planted_link(coloured_shards, tmp_path):
    # run_setup.output_folder touches OUT/.write-test-PID with Path.touch(), which follows a link there: the
    # link's target is created (or its mtime changed). The probe name is guessable (the pid); planted here by
    # the process itself just before the CLI runs, as a neighbour with write access to OUT could.
    out, target = tmp_path / "run", tmp_path / "created_by_probe"
    code = (f"import os, sys\nos.makedirs({str(out)!r})\n"
            f"os.symlink({str(target)!r}, os.path.join({str(out)!r}, f'.write-test-{{os.getpid()}}'))\n"
            "from dataio.cli import entry\n"
            f"sys.argv = ['dataio', 'train', '--train', {str(coloured_shards)!r}, '--out', {str(out)!r}, "
            f"{', '.join(repr(a) for a in TRAIN)}]\nsys.exit(entry())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=ENV)
    assert not target.exists(), f"the write probe created {target} through a link ({done.returncode})"


def test_control_a_fifo_planted_as_log_csv_is_replaced_not_waited_on(coloured_shards, tmp_path):
    # Holds: log.csv is written whole by write_atomic first, so a FIFO there is replaced, no hang.
    out = tmp_path / "run"
    out.mkdir()
    os.mkfifo(out / "log.csv")
    done = dataio("train", "--train", str(coloured_shards), "--out", str(out), *TRAIN)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / "log.csv").is_file()
