"""The gate's reads at pack time (issue 42, class 1), as a user meets them (the CLI): a caption linked out of the
source folder is rejected and never packed; a FIFO and a /proc file given as an image (in an image folder, or by
a path-only Parquet row) are rejected in one line each under an address-space cap, neither hung nor read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataio.formats.pairs.synthetic_pair_writers import write_caption_folder
from dataio.formats.pairs.synthetic_pairs import SyntheticPairsConfig
from tests.formats.test_bounded_reads import CAP, PAGEMAP, jpeg_bytes, needs_pagemap, rejected_of

ROOT = Path(__file__).resolve().parents[2]
SECRET = "aws_secret_access_key = SHOULD-NEVER-SHIP"


def dataio_capped(*args: str, cwd: Path, seconds: int = 60) -> subprocess.CompletedProcess:
    """``dataio ARGS`` under the address-space cap and a SIGKILL timeout (a hang is rc -9, not a stuck test)."""
    command = ["prlimit", CAP, "timeout", "-s", "KILL", str(seconds), sys.executable, "-m", "dataio", *args]
    env = {**os.environ, "DATAIO_NUM_WORKERS": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=seconds + 30, cwd=cwd, env=env)


def shard_bytes(out: Path) -> bytes:
    """Every member of every shard in ``out``, end to end (tars) or the files themselves (Arrow)."""
    found = b""
    for shard in sorted(out.iterdir()):
        if shard.suffix == ".tar":
            with tarfile.open(shard) as tar:
                found += b"".join(tar.extractfile(m).read() for m in tar if m.isreg())
        elif shard.suffix == ".arrow":
            found += shard.read_bytes()
    return found


def test_a_caption_linked_out_of_the_source_folder_is_rejected_and_never_packed(tmp_path):
    """Before: ``00000001.txt -> ~/.aws/credentials`` was read and packed as the pair's caption."""
    secret = tmp_path / "credentials"
    secret.write_text(SECRET + "\n")
    write_caption_folder(tmp_path / "src", SyntheticPairsConfig(count=4, seed=5))
    (tmp_path / "src" / "00000001.txt").unlink()
    (tmp_path / "src" / "00000001.txt").symlink_to(secret)
    (tmp_path / "src" / "inside.txt").write_text("a caption kept inside the folder\n")
    (tmp_path / "src" / "00000002.txt").unlink()
    (tmp_path / "src" / "00000002.txt").symlink_to("inside.txt")  # a link inside the tree: fine
    done = dataio_capped("convert", "images", "src", "out", "--captions", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("packed 3 image-text pairs"), done.stderr
    reason = f"its caption 00000001.txt is a link out of the source folder (to {secret}): not read"
    assert done.stderr.splitlines()[0] == f"rejected 00000001.jpg: {reason}"
    assert rejected_of(tmp_path / "out")["00000001.jpg"] == reason
    packed = shard_bytes(tmp_path / "out")
    assert b"SHOULD-NEVER-SHIP" not in packed and b"a caption kept inside the folder" in packed


def test_an_image_linked_out_of_the_source_folder_is_packed_and_a_kernel_file_behind_a_link_is_not(tmp_path):
    """Images may link out of the source folder (subsets linked into a shared store, the Hugging Face cache's
    snapshots -> blobs: the new user's layouts, tests/client_patterns): they are decoded and checked before packing. Text
    sidecars may not (above). The gate still refuses what a link leads to when it is not a regular file."""
    outside = tmp_path / "elsewhere.jpg"
    outside.write_bytes(jpeg_bytes(7))
    for label in ("a", "b"):
        (tmp_path / "src" / label).mkdir(parents=True)
        (tmp_path / "src" / label / "0.jpg").write_bytes(jpeg_bytes(40 + (label == "b") * 100))
    (tmp_path / "src" / "a" / "out.jpg").symlink_to(outside)
    (tmp_path / "src" / "b" / "in.jpg").symlink_to("../a/0.jpg")  # inside the tree: packed
    (tmp_path / "src" / "b" / "zero.jpg").symlink_to("/dev/zero")
    done = dataio_capped("convert", "images", "src", "out", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert rejected_of(tmp_path / "out") == {"b/zero.jpg": "not a regular file: character device"}
    assert "packed 4 images" in done.stdout


@needs_pagemap
def test_a_fifo_and_a_proc_file_as_images_are_one_line_each_without_memory_error_or_hang(tmp_path):
    """Before: a link to /proc/self/pagemap (its size says 0) was read up to the 1 GiB limit and joined: a
    MemoryError traceback under the cap."""
    for label in ("a", "b"):
        (tmp_path / "src" / label).mkdir(parents=True)
        for i in range(2):
            (tmp_path / "src" / label / f"{i}.jpg").write_bytes(jpeg_bytes(40 * i + (label == "b") * 100))
    os.mkfifo(tmp_path / "src" / "a" / "fifo.jpg")
    (tmp_path / "src" / "b" / "pagemap.jpg").symlink_to(PAGEMAP)
    done = dataio_capped("convert", "images", "src", "out", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    rejected = rejected_of(tmp_path / "out")
    assert rejected["a/fifo.jpg"] == "not a regular file: FIFO"
    assert rejected["b/pagemap.jpg"].startswith("not a regular file: a kernel file of /proc")  # never read
    assert len(done.stderr.splitlines()) == 2 and "packed 4 images" in done.stdout


@needs_pagemap
def test_path_only_parquet_rows_naming_a_fifo_or_a_proc_file_are_one_line_each(tmp_path):
    """A path-only row (``datasets``' to_parquet) can name any file; with the default limit (1 GiB) the
    pagemap row was a MemoryError traceback under the cap, and a FIFO row blocked the converter for ever."""
    os.mkfifo(tmp_path / "fifo.jpg")
    struct = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    images = [{"bytes": jpeg_bytes(10), "path": "in-row.jpg"},
              {"bytes": None, "path": str(tmp_path / "fifo.jpg")},
              {"bytes": None, "path": PAGEMAP},
              {"bytes": jpeg_bytes(90), "path": "in-row-2.jpg"}]
    pq.write_table(pa.table({"image": pa.array(images, struct), "label": pa.array([0, 1, 1, 0], pa.int64())}),
                   tmp_path / "rows.parquet")
    done = dataio_capped("convert", "images", "rows.parquet", "out", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    rejected = rejected_of(tmp_path / "out")
    assert "fifo.jpg' is not a file" in rejected["rows.parquet#1"]  # refused before it reaches a worker
    assert rejected["rows.parquet#2"].startswith(f"{PAGEMAP}: not a regular file: a kernel file of /proc")
    assert len(rejected) == 2 and "packed 2 images" in done.stdout
