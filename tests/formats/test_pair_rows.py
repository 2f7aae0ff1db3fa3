"""A bad row costs only itself (issue 42): what counts as a caption, the same for a caption folder, img2dataset
tars and Hub Parquet; a caption that is not UTF-8, or absurdly long, rejects its own Parquet row and not its row
group; a key's second picture is named, never dropped silently. Each is met as a user meets it: the CLI."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from tests.hostile_helpers import run_cli

GOOD = {"good1": "a red square", "good2": "\ufeffa caption after a byte-order mark", "good3": "tab\tand newline\n"}
BAD = {"nul_only": ("\0\0\0\0", "caption is only NUL bytes"),
       "control_only": ("\x01\x02\x1b\x7f", "caption holds only control characters"),
       "utf16_no_bom": ("a red square".encode("utf-16-le").decode("ascii"), "caption holds 12 NUL bytes")}


def jpeg(colour: tuple[int, int, int] = (200, 40, 40), kind: str = "JPEG") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (16, 16), colour).save(out, kind)
    return out.getvalue()


def rejected(folder: Path) -> dict[str, str]:
    return {line["path"]: line["reason"] for line in map(json.loads, (folder / "rejected.jsonl").read_text()
                                                         .splitlines())}


def packed_captions(folder: Path) -> list[str]:
    from dataio.formats.dataset.manifest import read_manifest
    from dataio.formats.dataset.sample_table import read_sample_table

    manifest = read_manifest(folder)[1]
    table = read_sample_table(folder / manifest.sample_table, declared=manifest.table_columns()).table
    return sorted(table.column("caption").to_pylist())


def write_parquet(path: Path, captions: list, *, row_group_size: int = 8, compression: str = "snappy") -> None:
    """A Hub caption file: an image struct and a caption column (``str``, or ``bytes`` written as they are into the
    string column, as a writer that does not check UTF-8 leaves them)."""
    raw = [c.encode() if isinstance(c, str) else c for c in captions]
    offsets = pa.array([0, *[sum(len(c) for c in raw[:i + 1]) for i in range(len(raw))]], pa.int32())
    strings = pa.Array.from_buffers(pa.string(), len(raw), [None, offsets.buffers()[1], pa.py_buffer(b"".join(raw))])
    images = pa.array([{"bytes": jpeg((i * 20 % 256, 40, 40)), "path": f"{i}.jpg"} for i in range(len(raw))])
    pq.write_table(pa.table({"image": images, "caption": strings}), path, row_group_size=row_group_size,
                   compression=compression)


def test_a_caption_that_is_not_text_is_one_line_in_every_layout(tmp_path):
    """Before: captions of only NUL bytes, only control characters, or UTF-16 without a byte-order mark (NULs
    between ASCII letters) were packed as text by all three packers."""
    captions = {**GOOD, **{key: text for key, (text, _) in BAD.items()}}
    folder = tmp_path / "folder"
    folder.mkdir()
    (tmp_path / "tars").mkdir()
    with tarfile.open(tmp_path / "tars" / "00000.tar", "w") as tar:
        for key, caption in captions.items():
            (folder / f"{key}.jpg").write_bytes(jpeg())
            (folder / f"{key}.txt").write_text(caption)
            for name, data in ((f"{key}.jpg", jpeg()), (f"{key}.txt", caption.encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    (tmp_path / "hub").mkdir()
    write_parquet(tmp_path / "hub" / "train-00000-of-00001.parquet", list(captions.values()))
    keys = {"folder": lambda key: f"{key}.jpg", "tars": lambda key: f"00000.tar/{key}",
            "parquet": lambda key: f"train-00000-of-00001.parquet#{list(captions).index(key)}"}
    runs = {"folder": run_cli("convert", "images", "folder", "out-folder", "--captions", "--no-progress", cwd=tmp_path),
            "tars": run_cli("index", "tars", "--no-progress", cwd=tmp_path),
            "parquet": run_cli("convert", "images", "hub", "out-parquet", "--caption-column", "caption",
                               "--no-progress", cwd=tmp_path)}
    for layout, done in runs.items():
        assert done.returncode == 0 and "Traceback" not in done.stderr, (layout, done.stderr)
        out = tmp_path / ("tars" if layout == "tars" else f"out-{layout}")
        lines = rejected(out)
        assert set(lines) == {keys[layout](key) for key in BAD}, (layout, lines)
        for key, (_, reason) in BAD.items():
            assert lines[keys[layout](key)].startswith(reason), (layout, lines)
        assert packed_captions(out) == sorted(v.removeprefix("\ufeff") for v in GOOD.values()), layout


def test_a_caption_that_is_not_utf8_costs_only_its_own_row(tmp_path):
    """Before: one caption that is not UTF-8 in a row group of 8 rejected all 8 ('row group 0 (rows 0-7) is
    damaged: 'utf-8' codec can't decode...'): the row group's captions were decoded together."""
    captions = [f"caption {i}".encode() for i in range(8)]
    captions[3] = b"caf\xe9 au lait"
    (tmp_path / "hub").mkdir()
    write_parquet(tmp_path / "hub" / "train-00000-of-00001.parquet", captions)
    done = run_cli("convert", "images", "hub", "out", "--caption-column", "caption", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("packed 7 image-text pairs"), done.stdout + done.stderr
    assert rejected(tmp_path / "out") == {"train-00000-of-00001.parquet#3": "caption is not UTF-8 (byte 0xe9 at 3)"}
    assert packed_captions(tmp_path / "out") == sorted(c.decode() for i, c in enumerate(captions) if i != 3)


HUGE = 300_000_000  # bytes of one caption: a 13 KB zstd file


def test_a_huge_caption_is_rejected_from_the_footer_and_its_row_group_packs_under_a_memory_cap(tmp_path):
    """Before: the caption column was decompressed whole (its dictionary page holds every caption of the row
    group) before any size was checked: under a 1.5 GB address-space cap all 8 rows were rejected (with 2 GB the
    converter died of a segfault), and without a cap memory grew with the caption. Now the footer says the chunk
    is larger than 8 captions may be, its pages are streamed and the long caption skipped, never held."""
    captions = [f"caption {i}".encode() for i in range(8)]
    captions[5] = b"x" * HUGE
    (tmp_path / "hub").mkdir()
    write_parquet(tmp_path / "hub" / "train-00000-of-00001.parquet", captions, compression="zstd")
    del captions[5]
    command = ["prlimit", f"--as={1536 << 20}", "timeout", "-s", "KILL", "120", sys.executable, "-m", "dataio",
               "convert", "images", "hub", "out", "--caption-column", "caption", "--no-progress"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=150,
                          env={**os.environ, "DATAIO_NUM_WORKERS": "1"})
    assert done.returncode == 0 and done.stdout.startswith("packed 7 image-text pairs"), done.stdout + done.stderr
    assert rejected(tmp_path / "out") == {"train-00000-of-00001.parquet#5": (
        "caption of 300,000,000 bytes is longer than the 16,384 packed (--max-caption-bytes)")}
    assert packed_captions(tmp_path / "out") == sorted(c.decode() for c in captions)


@pytest.mark.parametrize("layout", [dict(compression="zstd"), dict(compression="snappy", use_dictionary=False),
                                    dict(compression="gzip", data_page_version="2.0"),
                                    dict(compression="none", use_dictionary=False, data_page_version="2.0")])
def test_captions_read_page_by_page_are_the_captions_pyarrow_reads(tmp_path, layout):
    """The page-by-page reader (``parquet_values``) over the layouts writers use: dictionary or plain pages, v1 or
    v2, zstd, snappy, gzip or none, a null caption; its captions are the ones pyarrow reads, the long one named."""
    captions: list = [f"caption {i} " * (i + 1) for i in range(12)]
    captions[4], captions[2] = "y" * (2 << 20), None  # both in the first row group, the one read page by page
    table = pa.table({"image": pa.array([{"bytes": jpeg((i * 20, 40, 40)), "path": f"{i}.jpg"} for i in range(12)]),
                      "caption": pa.array(captions, pa.string())})
    (tmp_path / "hub").mkdir()
    pq.write_table(table, tmp_path / "hub" / "train-00000-of-00001.parquet", row_group_size=6, **layout)
    done = run_cli("convert", "images", "hub", "out", "--caption-column", "caption", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("packed 10 image-text pairs"), done.stdout + done.stderr
    assert rejected(tmp_path / "out") == {
        "train-00000-of-00001.parquet#4": "caption of 2,097,152 bytes is longer than the 16,384 packed "
                                          "(--max-caption-bytes)",
        "train-00000-of-00001.parquet#2": "no caption in the row"}
    assert packed_captions(tmp_path / "out") == sorted(c for i, c in enumerate(captions) if i not in (4, 2))


def test_a_second_picture_of_a_key_is_named_in_a_caption_folder_and_in_tars(tmp_path):
    """Before: ``KEY.jpg`` and ``KEY.png`` in a caption folder were both packed with the one ``KEY.txt``, and in a
    tar being indexed the second picture, and a member of no kind (``KEY.npy``), were left out without a line."""
    folder = tmp_path / "folder"
    folder.mkdir()
    (tmp_path / "tars").mkdir()
    members = {"a.jpg": jpeg(), "a.png": jpeg((0, 0, 200), "PNG"), "a.txt": b"a red square", "b.jpg": jpeg(),
               "b.txt": b"another red square"}
    with tarfile.open(tmp_path / "tars" / "00000.tar", "w") as tar:
        for name, data in {**members, "b.npy": b"\x93NUMPY"}.items():
            if name != "b.npy":
                (folder / name).write_bytes(data)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    done = run_cli("convert", "images", "folder", "out", "--captions", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("packed 2 image-text pairs"), done.stdout + done.stderr
    assert rejected(tmp_path / "out") == {"a.png": "a second picture of the name a (a.jpg is packed with its "
                                                   "caption): not packed"}
    done = run_cli("index", "tars", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("indexed 2 image-text pairs"), done.stdout + done.stderr
    assert rejected(tmp_path / "tars") == {
        "00000.tar/a.png": "a second picture of a (a.jpg is indexed): not indexed",
        "00000.tar/b.npy": "a member no kind reads (only .jpg, .jpeg, .png, .webp, .cls, .json, .txt): not indexed"}
    assert packed_captions(tmp_path / "out") == packed_captions(tmp_path / "tars") == ["a red square",
                                                                                       "another red square"]


def test_a_damaged_page_costs_only_the_rows_from_it_on_not_its_row_group(tmp_path):
    """Before: a damaged page header in the middle of a row group's image column rejected all 8 rows of the
    group; now the group is read again one row at a time and the rows before the damaged page are packed."""
    from dataio.formats.parquet_values import _struct  # the page headers' parser, to find the fourth page

    path = tmp_path / "hub" / "train-00000-of-00001.parquet"
    path.parent.mkdir()
    table = pa.table({"image": pa.array([{"bytes": jpeg((i * 20, 40, 40)), "path": f"{i}.jpg"} for i in range(8)]),
                      "caption": pa.array([f"caption {i}" for i in range(8)])})
    pq.write_table(table, path, row_group_size=8, data_page_size=1, write_batch_size=1, use_dictionary=False)
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(0)  # image.bytes: one page a row
    with open(path, "rb") as f:
        f.seek(chunk.data_page_offset)
        for _ in range(3):
            f.seek(_struct(f)[3], 1)
        fourth = f.tell()
    data = bytearray(path.read_bytes())
    data[fourth:fourth + 24] = bytes([0x0F] * 24)
    path.write_bytes(bytes(data))
    done = run_cli("convert", "images", "hub", "out", "--caption-column", "caption", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("packed 3 image-text pairs"), done.stdout + done.stderr
    lines = rejected(tmp_path / "out")
    assert sorted(lines) == [f"train-00000-of-00001.parquet#{row}" for row in range(3, 8)]
    assert all(reason.startswith("row group 0 (rows 0-7) is damaged from row 3: ") for reason in lines.values())
    assert packed_captions(tmp_path / "out") == ["caption 0", "caption 1", "caption 2"]
