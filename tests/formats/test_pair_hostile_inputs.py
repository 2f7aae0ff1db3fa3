"""Hostile inputs to image-text pair packing and verify: sidecar captions that are not files, tokenizer names
holding credentials, sample tables and manifests of a pair folder tampered with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dataio.formats.dataset.verify import verify
from dataio.formats.pairs.synthetic_pair_writers import write_caption_folder
from dataio.formats.pairs.synthetic_pairs import SyntheticPairsConfig
from tests.pair_tamper import tampered

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
        "rejected 00000002.jpg: its caption 00000002.txt is a link out of the source folder (to /dev/zero): not read"]


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


TAMPERED = {"caption_of_integers": "column 'caption' is int64, not strings",
            "no_caption": "no 'caption' column, though the manifest declares captions",
            "ids_of_strings": "column 'input_ids' is large_list<item: string>, not lists of uint8, uint16 or uint32",
            "ids_of_int64": "column 'input_ids' is large_list<item: int64>, not lists of uint8, uint16 or uint32",
            "no_json_offset": "no 'json_offset' column, though the manifest declares .json members",
            "vocab_zero": "the manifest's options.tokenizer.vocab_size is 0, not a positive integer",
            "pad_not_int": "the manifest's options.tokenizer.pad_id is 'zero', not an id below the vocabulary size",
            "eos_past_vocab": "the manifest's options.tokenizer.eos_id is 1000000, not an id below the vocabulary"}


@pytest.mark.parametrize("kind", sorted(TAMPERED))
def test_verify_names_a_tampered_pair_table_or_tokenizer_record(pair_tars, tmp_path, kind):
    """Before: each passed `dataio verify` as OK (the loader then failed with a pyarrow or numpy traceback), or,
    for ids of strings, verify itself ended in a TypeError traceback."""
    folder = tampered(pair_tars, tmp_path / "tars", kind)
    report = verify(folder)
    assert not report.ok and [p for p in report.problems if TAMPERED[kind] in p], report.problems


def test_the_cli_verify_of_ids_that_are_strings_is_one_line_not_a_traceback(pair_tars, tmp_path):
    folder = tampered(pair_tars, tmp_path / "tars", "ids_of_strings")
    done = run_cli("verify", folder, cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"samples.arrow: {TAMPERED['ids_of_strings']}" in done.stdout + done.stderr


def test_a_caption_of_only_invisible_characters_is_an_empty_caption(tmp_path):
    """Before: a .txt of zero-width spaces, or a BOM and blanks, was packed as a caption (str.strip keeps them)."""
    import io
    import tarfile

    from PIL import Image

    image = io.BytesIO()
    Image.new("RGB", (16, 16), "red").save(image, "JPEG")
    members = {"k1.jpg": image.getvalue(), "k1.txt": "\u200b\u200b".encode(), "k2.jpg": image.getvalue(),
               "k2.txt": "\ufeff  \n".encode(), "k3.jpg": image.getvalue(), "k3.txt": "\ufeffa red square".encode()}
    (tmp_path / "tars").mkdir()
    with tarfile.open(tmp_path / "tars" / "00000.tar", "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    done = run_cli("index", "tars", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("indexed 1 image-text pairs"), done.stdout + done.stderr
    lines = (tmp_path / "tars" / "rejected.jsonl").read_text().splitlines()
    assert lines == ['{"path": "00000.tar/k1", "reason": "empty caption"}',
                     '{"path": "00000.tar/k2", "reason": "empty caption"}']
