"""Converter resumption: SIGKILL at random points, rerun, byte-identical output."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dataio.errors import UsageError
from formats.convert_journal import JOURNAL_DIR
from formats.image_convert import ConvertImagesConfig, convert_images

ROOT = Path(__file__).parent.parent


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def convert_command(src: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "dataio", "convert", "images", str(src), str(out), "--workers", "2",
            "--max-shard-samples", "2", "--no-progress"]


@pytest.fixture(scope="module")
def reference(image_folder, tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("reference") / "out"
    subprocess.run(convert_command(image_folder[0], out), check=True, capture_output=True, cwd=ROOT)
    return files_of(out)


def journal_records(out: Path) -> int:
    folder = out / JOURNAL_DIR
    return len(list(folder.glob("[0-9]*.json"))) if folder.is_dir() else 0


def run_until_killed(src: Path, out: Path, records: int, delay: float) -> bool:
    """Start a conversion and SIGKILL it once ``records`` shards are journaled (+ ``delay`` s); True if killed."""
    process = subprocess.Popen(convert_command(src, out), cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    while journal_records(out) < records and process.poll() is None:
        time.sleep(0.002)
    time.sleep(delay)  # usually mid-shard: a partial file is left behind
    killed = process.poll() is None
    if killed:
        os.kill(process.pid, signal.SIGKILL)
    assert process.wait() in (0, -signal.SIGKILL), "a rerun after a kill must not fail"
    return killed


def test_sigkill_at_random_points_then_rerun_is_byte_identical(image_folder, reference, tmp_path):
    out = tmp_path / "out"
    rng = random.Random(os.getpid())
    kills = sum(run_until_killed(image_folder[0], out, records, rng.uniform(0, 0.02)) for records in (2, 7, 13))
    assert kills >= 2, "the conversion outran the kills; make it longer"
    done = subprocess.run(convert_command(image_folder[0], out), capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert files_of(out) == reference
    assert not (out / JOURNAL_DIR).exists() and not list(out.glob(".*"))


def test_a_damaged_finished_shard_is_rewritten(image_folder, reference, tmp_path):
    out = tmp_path / "out"
    config = ConvertImagesConfig(src=image_folder[0], out=out, max_shard_samples=2, workers=1, progress=False)
    assert run_until_killed(image_folder[0], out, 4, 0.0)
    victim = out / "shard-000001.tar"
    data = bytearray(victim.read_bytes())
    data[600] ^= 0xFF
    victim.write_bytes(bytes(data))
    convert_images(config)
    assert files_of(out) == reference


def test_a_rerun_with_other_options_is_refused(image_folder, tmp_path):
    out = tmp_path / "out"
    (out / JOURNAL_DIR).mkdir(parents=True)
    (out / JOURNAL_DIR / "options.json").write_text('{"identity": "another conversion"}')
    with pytest.raises(UsageError, match="other options"):
        convert_images(ConvertImagesConfig(src=image_folder[0], out=out, workers=1, progress=False))
