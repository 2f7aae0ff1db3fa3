"""Hostile inputs to image-text pair packing and verify: sidecar captions that are not files, tokenizer names
holding credentials."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dataio.formats.dataset.verify import verify
from dataio.formats.images.synthetic_pair_writers import write_caption_folder
from dataio.formats.images.synthetic_pairs import SyntheticPairsConfig

SECRET = "s3cr3tPASSWORD42"


def run_cli(*args: str | Path, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dataio", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "DATAIO_NUM_WORKERS": "1"})


def test_a_sidecar_caption_that_is_a_fifo_or_a_device_is_one_line_and_never_read(tmp_path):
    """Before: a FIFO named NAME.txt blocked the converter for ever (open without O_NONBLOCK), and a symlink to
    /dev/zero was 'caption of 0 bytes is longer than the 16,384 packed'."""
    write_caption_folder(tmp_path / "src", SyntheticPairsConfig(count=4, seed=5))
    (tmp_path / "src" / "00000001.txt").unlink()
    os.mkfifo(tmp_path / "src" / "00000001.txt")
    (tmp_path / "src" / "00000002.txt").unlink()
    (tmp_path / "src" / "00000002.txt").symlink_to("/dev/zero")
    done = run_cli("convert", "images", "src", "out", "--captions", "--no-progress", cwd=tmp_path, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("packed 2 image-text pairs"), done.stderr
    assert done.stderr.splitlines() == [
        "rejected 00000001.jpg: its caption 00000001.txt is not a regular file: FIFO",
        "rejected 00000002.jpg: its caption 00000002.txt is not a regular file: character device"]


def test_a_tokenizer_named_by_a_url_with_credentials_is_refused_without_showing_them(tmp_path):
    """Before: `--tokenizer https://user:pass@host/t.json` printed the password (Path made it https:/user:pass@...,
    which the URL redaction did not recognise)."""
    write_caption_folder(tmp_path / "src", SyntheticPairsConfig(count=2, seed=5))
    done = run_cli("convert", "images", "src", "out", "--captions", "--no-progress", "--tokenizer",
                   f"https://alice:{SECRET}@hub.example.com/tokenizer.json", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert SECRET not in done.stderr and "https://***@hub.example.com/tokenizer.json does not exist" in done.stderr
    os.mkfifo(tmp_path / "fifo.json")
    done = run_cli("convert", "images", "src", "out", "--captions", "--no-progress", "--tokenizer", "fifo.json",
                   cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.endswith("tokenizer fifo.json is not a regular file\n"), done.stderr
