"""Pack-time reads stop at a size limit (issue 33): a 50 GB sparse image, a file that reads on for ever, a
path-only Parquet row naming either, a ``--classes /dev/zero``: each is one rejected row (or one line), read at
most one byte past the limit, under an address-space cap and a timeout, as a user meets them (the CLI)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from dataio.formats.bounded_read import FileTooLarge, read_fd_at_most
from dataio.formats.images.image_tree import read_regular_file
from dataio.formats.limits import MAX_FILE_BYTES
from dataio.formats.sizes import parse_size

ROOT = Path(__file__).resolve().parents[2]
CAP = "--as=3000000000"  # bytes of address space: the old read of a 50 GB file died of MemoryError under it
PAGEMAP = "/proc/self/pagemap"  # a regular file whose size says 0 and that reads 256 GiB (8 bytes a page)
needs_pagemap = pytest.mark.skipif(not os.access(PAGEMAP, os.R_OK), reason="needs Linux's /proc/self/pagemap")


def dataio_capped(*args: str, seconds: int = 60) -> subprocess.CompletedProcess:
    """``dataio ARGS`` under ``prlimit`` (address space) and ``timeout`` (SIGKILL after ``seconds``)."""
    command = ["prlimit", CAP, "timeout", "-s", "KILL", str(seconds), sys.executable, "-m", "dataio", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=seconds + 30, cwd=ROOT)


def jpeg_bytes(colour: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 32), (colour, 90, 160)).save(out, format="JPEG", quality=90)
    return out.getvalue()


def rejected_of(out: Path) -> dict[str, str]:
    return {r["path"]: r["reason"] for r in map(json.loads, (out / "rejected.jsonl").read_text().splitlines())}


@pytest.fixture
def tree_with_a_huge_file(tmp_path) -> Path:
    """Two classes of small JPEGs, and a 50 GB sparse file with an image name in one of them."""
    src = tmp_path / "src"
    for label in ("a", "b"):
        (src / label).mkdir(parents=True)
        for i in range(3):
            (src / label / f"{i}.jpg").write_bytes(jpeg_bytes(40 * i + (label == "b") * 120))
    with open(src / "a" / "huge.jpg", "wb") as f:
        f.truncate(50 * 10**9)  # sparse: no disk used, and stat says 50 GB
    return src


def test_a_50_gb_sparse_image_is_rejected_with_its_size_unread(tree_with_a_huge_file, tmp_path):
    done = dataio_capped("convert", "images", str(tree_with_a_huge_file), str(tmp_path / "out"), "--workers", "2",
                         "--no-progress")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    reason = "file too large: 50,000,000,000 bytes (limit 1,073,741,824)"
    assert rejected_of(tmp_path / "out") == {"a/huge.jpg": reason}
    assert done.stderr.splitlines() == [f"rejected a/huge.jpg: {reason}"]
    assert "packed 6 images" in done.stdout


@needs_pagemap
def test_a_file_that_reads_on_for_ever_stops_one_byte_past_the_limit(tmp_path):
    limit = (1 << 20) + 7  # the last read is then 8 bytes: pagemap is read in whole 8-byte entries
    fd = os.open(PAGEMAP, os.O_RDONLY)
    try:
        with pytest.raises(FileTooLarge, match=f"reads on past {limit:,} bytes"):
            read_fd_at_most(fd, limit)
        assert os.lseek(fd, 0, os.SEEK_CUR) == limit + 1  # never read further
    finally:
        os.close(fd)
    exact = tmp_path / "exact.bin"
    exact.write_bytes(b"x" * 1000)
    assert read_regular_file(exact, 1000) == b"x" * 1000  # exactly the limit is read whole
    with pytest.raises(FileTooLarge, match="1,000 bytes"):
        read_regular_file(exact, 999)


@needs_pagemap
def test_path_only_parquet_rows_naming_a_huge_or_endless_file_are_rejected_rows(tree_with_a_huge_file, tmp_path):
    """A path-only row (``datasets``' to_parquet) can name any file: a 50 GB sparse file, /proc/self/pagemap."""
    struct = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    images = [{"bytes": jpeg_bytes(10), "path": "in-row.jpg"},
              {"bytes": None, "path": str(tree_with_a_huge_file / "a" / "huge.jpg")},
              {"bytes": None, "path": PAGEMAP},
              {"bytes": None, "path": str(tree_with_a_huge_file / "b" / "0.jpg")}]
    source = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"image": pa.array(images, struct), "label": pa.array([0, 1, 1, 0], pa.int64())}),
                   source)
    out = tmp_path / "out"
    done = dataio_capped("convert", "images", str(source), str(out), "--workers", "2", "--no-progress",
                         "--max-file-size", str((1 << 20) + 7))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert rejected_of(out) == {
        "rows.parquet#1": f"{tree_with_a_huge_file}/a/huge.jpg: file too large: 50,000,000,000 bytes "
                          "(limit 1,048,583)",
        "rows.parquet#2": f"{PAGEMAP}: not a regular file: a kernel file of /proc (its size, 0, does not bound what "
                          "it reads)"}  # the gate refuses /proc unread (issue 42)
    assert "packed 2 images" in done.stdout


def test_max_file_size_is_a_flag_with_a_documented_default(tmp_path):
    """A file of exactly --max-file-size is packed, one byte more is rejected with both sizes; a row's own bytes
    are held to the same limit; a bad value is exit 2 naming the flag."""
    assert parse_size("1GiB") == MAX_FILE_BYTES  # the CLI's default is the library's
    small, large = jpeg_bytes(30), jpeg_bytes(200) + b"\0" * 64  # trailing bytes after the JPEG's end
    assert len(small) < len(large)
    src = tmp_path / "src"
    for label, data in (("a", small), ("b", large)):
        (src / label).mkdir(parents=True)
        (src / label / "x.jpg").write_bytes(data)
    done = dataio_capped("convert", "images", str(src), str(tmp_path / "out"), "--max-file-size", str(len(small)),
                         "--no-progress", "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert rejected_of(tmp_path / "out") == {"b/x.jpg": f"file too large: {len(large):,} bytes (limit {len(small):,})"}
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["options"]["max_file_size"] == len(small)
    struct = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    rows = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"image": pa.array([{"bytes": small, "path": "s"}, {"bytes": large, "path": "l"}], struct),
                             "label": pa.array([0, 1], pa.int64())}), rows)
    done = dataio_capped("convert", "images", str(rows), str(tmp_path / "rows"), "--max-file-size", str(len(small)),
                         "--no-progress", "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert rejected_of(tmp_path / "rows") == {"rows.parquet#1": f"image too large: {len(large):,} bytes (limit {len(small):,})"}
    for bad in ("0", "-5", "lots", "9" * 400 + "GB"):
        done = dataio_capped("convert", "images", str(src), str(tmp_path / "bad"), "--max-file-size", bad)
        assert done.returncode == 2, (bad, done.stderr)
        assert done.stderr.startswith("dataio convert: error: --max-file-size must be a positive number of bytes")
        assert len(done.stderr.splitlines()) == 1


def test_a_classes_file_that_reads_on_is_one_line(tree_with_a_huge_file, tmp_path):
    done = dataio_capped("convert", "images", str(tree_with_a_huge_file), str(tmp_path / "out"), "--classes",
                         "/dev/zero", "--no-progress")
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines() == ["dataio convert: error: classes file /dev/zero: not a regular file: "
                                        "character device"]  # the gate (issue 42): refused unread, not read to 64 MiB


def test_a_huge_tokenizer_file_is_one_line_unread(tmp_path):
    """``Tokenizer.from_file`` read a 20 GB (sparse) file whole: out of memory under the cap, and without one
    as much memory as the machine has."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a few words\nand a few more\n")
    tokenizer = tmp_path / "tokenizer.json"
    with open(tokenizer, "wb") as f:
        f.truncate(20 * 2**30)
    done = dataio_capped("convert", "text", str(corpus), str(tmp_path / "out"), "--tokenizer", str(tokenizer),
                         "--no-progress")
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines() == [f"dataio convert: error: tokenizer {tokenizer}: file too large: "
                                        "21,474,836,480 bytes (limit 268,435,456)"]


def test_a_huge_manifest_is_one_line_unread(coloured_shards, tmp_path):
    """A folder's ``manifest.json`` is input too: a 5 GB sparse one was read whole, a MemoryError traceback under
    the address-space cap; now one line naming it with its size, exit 1, unread, for ``verify`` as for a loader."""
    folder = tmp_path / "folder"
    folder.mkdir()
    for path in coloured_shards.iterdir():
        if path.name != "manifest.json":
            (folder / path.name).symlink_to(path)
    with open(folder / "manifest.json", "wb") as f:
        f.truncate(5 * 10**9)
    done = dataio_capped("verify", str(folder))
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr == (f"dataio verify: {folder / 'manifest.json'}: cannot read (file too large: 5,000,000,000 "
                           "bytes (limit 268,435,456))\n")
    script = f"import dataio; dataio.ImageLoader({str(folder)!r}, batch_size=4, image_size=16)"
    command = ["prlimit", CAP, "timeout", "-s", "KILL", "60", sys.executable, "-c", script]
    loader = subprocess.run(command, capture_output=True, text=True, timeout=90, cwd=ROOT)
    assert loader.returncode == 1 and "ManifestError" in loader.stderr and "file too large" in loader.stderr
