"""Files named by flags go through the gate's read (issue 42): a FIFO given as ``--classes``, ``--mixture`` or
``--tokenizer`` is refused up front in one line, never waited on (it used to block the command for ever: the
open of a FIFO waits for a writer); a FIFO where a folder's Arrow sample table is (read memory-mapped) is one
problem of ``dataio verify``, not a hang."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from tests.formats.test_bounded_reads import jpeg_bytes

ROOT = Path(__file__).resolve().parents[2]
SECONDS = 30  # a FIFO that is waited on is killed here: rc -9, not a stuck test


def dataio_run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``dataio ARGS`` under a SIGKILL timeout, as a user runs it."""
    command = ["timeout", "-s", "KILL", str(SECONDS), sys.executable, "-m", "dataio", *args]
    env = {**os.environ, "DATAIO_NUM_WORKERS": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=SECONDS + 30, cwd=cwd, env=env)


def one_line(done: subprocess.CompletedProcess, code: int) -> str:
    assert done.returncode == code, (done.returncode, done.stderr[-2000:])
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    return done.stderr.rstrip("\n")


@pytest.fixture
def fifo(tmp_path) -> Path:
    """A FIFO no one writes to: opening it for reading waits for ever."""
    path = tmp_path / "named.fifo"
    os.mkfifo(path)
    return path


@pytest.fixture
def small_tree(tmp_path) -> Path:
    """Two classes of three tiny JPEGs."""
    src = tmp_path / "src"
    for label in ("a", "b"):
        (src / label).mkdir(parents=True)
        for i in range(3):
            (src / label / f"{i}.jpg").write_bytes(jpeg_bytes(40 * i + (label == "b") * 120))
    return src


def test_a_fifo_as_classes_file_is_one_line_unread(fifo, small_tree, tmp_path):
    """Before: ``--classes FIFO`` hung the conversion (killed by the timeout)."""
    line = one_line(dataio_run("convert", "images", str(small_tree), "out", "--classes", str(fifo),
                               "--no-progress", cwd=tmp_path), 2)
    assert line == f"dataio convert: error: classes file {fifo}: not a regular file: FIFO"
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_fifo_as_mixture_file_is_one_line_unread(fifo, tmp_path):
    """Before: ``dataio train --mixture FIFO`` hung (killed by the timeout)."""
    line = one_line(dataio_run("train", "--mixture", str(fifo), cwd=tmp_path), 2)
    assert line == f"dataio train: error: mixture file {fifo}: not a regular file: FIFO"


def test_a_fifo_as_tokenizer_is_one_line_unread(fifo, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a few words\nand a few more\n")
    line = one_line(dataio_run("convert", "text", str(corpus), "out", "--tokenizer", str(fifo), "--no-progress",
                               cwd=tmp_path), 2)
    assert line == f"dataio convert: error: tokenizer {fifo} is not a regular file"


def test_a_fifo_as_a_folders_sample_table_is_one_problem_not_a_hang(small_tree, tmp_path):
    """Before: ``pa.memory_map`` opened ``samples.arrow`` itself, and a FIFO there hung ``dataio verify`` (killed
    by the timeout); the gate's ``map_input`` checks the file on its descriptor first."""
    convert_images(ConvertImagesConfig(src=small_tree, out=tmp_path / "out", num_workers=1, progress=False))
    (tmp_path / "out" / "samples.arrow").unlink()
    os.mkfifo(tmp_path / "out" / "samples.arrow")
    done = dataio_run("verify", "out", cwd=tmp_path)
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stdout + done.stderr
    assert "out/samples.arrow: cannot read sample table (not a regular file: FIFO)" in (done.stdout + done.stderr
                                                                                         ).splitlines()
