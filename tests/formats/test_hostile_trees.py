"""The converter walks hostile source trees safely: symlink loops, FIFOs and devices, unreadable folders and files,
names that are not UTF-8, 16-bit and float images, WebP without a decoder, and a deterministic rejected.jsonl."""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, features

from dataio import ImageLoader
from dataio.cli import main
from dataio.formats.images import image_convert, image_tree, source_reads
from dataio.formats.images.image_convert import REJECTED_NAME, ConvertImagesConfig, convert_images
from dataio.formats.images.image_prepare import ImagePrepareConfig, PreparedImage, prepare_image
from dataio.formats.images.image_tree import (NO_WEBP, NotRegularFile, escape_path, read_regular_file, source_path,
                                       unescape_path, walk_image_tree)
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from tests.conftest import colour_of, index_of

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60  # seconds: a hang (FIFO read, endless symlink walk) fails the test instead of the suite


def jpeg(path: Path | bytes, colour: tuple[int, int, int] = (200, 40, 40)) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    with open(path, "wb") as f:
        Image.new("RGB", (32, 24), colour).save(f, format="JPEG", quality=95)


def convert_cli(src: Path, out: Path, *extra: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """``dataio convert images`` in a subprocess with a timeout (the hang cases)."""
    command = [*prefix, sys.executable, "-m", "dataio", "convert", "images", str(src), str(out), "--no-progress",
               *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)


def rejected_of(out: Path) -> dict[str, str]:
    lines = (out / REJECTED_NAME).read_text().splitlines()
    return {r["path"]: r["reason"] for r in map(json.loads, lines)}


def packed_paths(out: Path) -> list[str]:
    folder, manifest = read_manifest(out)
    return read_sample_table(folder / manifest.sample_table).table.column("path").to_pylist()


def test_one_symlink_loop_packs_each_image_once(tmp_path):
    src = tmp_path / "src"
    for i in range(3):
        jpeg(src / "a" / f"{i}.jpg")
    os.symlink("../a", src / "a" / "self")
    done = convert_cli(src, tmp_path / "out", "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert packed_paths(tmp_path / "out") == ["a/0.jpg", "a/1.jpg", "a/2.jpg"]  # 41 copies before
    assert rejected_of(tmp_path / "out") == {"a/self": "symlink loop back to a"}


def test_two_loops_and_a_second_link_end_and_pack_each_image_once(tmp_path):
    src = tmp_path / "src"
    for i in range(3):
        jpeg(src / "a" / f"{i}.jpg")
        jpeg(src / "b" / "deep" / f"{i}.jpg")
    os.symlink("../a", src / "a" / "self")  # two loops: this run hung, memory growing, before
    os.symlink("../..", src / "b" / "deep" / "up")
    os.symlink("../b/deep", src / "a" / "alias")  # not a loop: a second name for a folder walked elsewhere
    done = convert_cli(src, tmp_path / "out", "--workers", "2")
    assert done.returncode == 0, done.stderr
    paths = packed_paths(tmp_path / "out")
    assert len(paths) == len(set(paths)) == 6
    # a/alias sorts before b, so the real folder is packed under that name first: each once, whichever name
    assert sorted(paths) == [f"a/{i}.jpg" for i in range(3)] + [f"a/alias/{i}.jpg" for i in range(3)]
    assert rejected_of(tmp_path / "out") == {"a/self": "symlink loop back to a",
                                             "b/deep": "folder already walked as a/alias",
                                             "a/alias/up": "symlink loop back to ."}


def test_fifo_device_and_socket_are_rejected_without_a_hang(tmp_path):
    src = tmp_path / "src"
    jpeg(src / "c" / "good.jpg")
    os.mkfifo(src / "c" / "fifo.jpg")  # reading it blocked forever before
    os.symlink("/dev/zero", src / "c" / "zero.jpg")  # endless bytes
    os.symlink("fifo.jpg", src / "c" / "link-to-fifo.png")
    server = socket.socket(socket.AF_UNIX)
    cwd = os.getcwd()
    os.chdir(src / "c")  # a short relative name: socket paths are limited to about 100 bytes
    try:
        server.bind("sock.jpg")
    finally:
        os.chdir(cwd)
    try:
        for workers in ("1", "2"):
            done = convert_cli(src, tmp_path / f"out{workers}", "--workers", workers)
            assert done.returncode == 0, done.stderr
            assert packed_paths(tmp_path / f"out{workers}") == ["c/good.jpg"]
            assert rejected_of(tmp_path / f"out{workers}") == {
                "c/fifo.jpg": "not a regular file: FIFO", "c/link-to-fifo.png": "not a regular file: FIFO",
                "c/sock.jpg": "not a regular file: socket", "c/zero.jpg": "not a regular file: character device"}
        assert convert_cli(src, tmp_path / "strict", "--workers", "1", "--strict").returncode == 1
    finally:
        server.close()


def test_a_file_swapped_for_a_fifo_after_the_walk_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "late.jpg"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []
    reader = threading.Thread(target=lambda: outcome.append(pytest.raises(NotRegularFile, read_regular_file, fifo).value),
                              daemon=True)
    reader.start()
    reader.join(TIMEOUT)
    assert not reader.is_alive(), "opening a FIFO blocked"
    assert str(outcome[0]) == "not a regular file: FIFO"
    with pytest.raises(NotRegularFile, match="character device"):
        read_regular_file("/dev/zero")
    (tmp_path / "plain.jpg").write_bytes(b"x" * 3_000_000)
    assert read_regular_file(tmp_path / "plain.jpg") == b"x" * 3_000_000


def _without_dac_override() -> tuple[str, ...] | None:
    """A command prefix under which this process's permission bits bind: none needed for a normal user; as root,
    setpriv dropping CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (a chmod 000 does not stop root otherwise)."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        return None
    caps = "-dac_override,-dac_read_search"
    prefix = ("setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}")
    probe = subprocess.run([*prefix, "true"], capture_output=True)
    return prefix if probe.returncode == 0 else None


def test_unreadable_folder_and_file_are_listed_with_errno_and_strict_fails(tmp_path):
    prefix = _without_dac_override()
    if prefix is None:
        pytest.skip("running as root without setpriv: covered in-process by test_errors_seen_in_process_...")
    src = tmp_path / "src"
    for i in range(3):
        jpeg(src / "a" / "locked" / f"{i}.jpg")  # these three vanished with exit 0 before, even under --strict
    jpeg(src / "a" / "ok.jpg")
    jpeg(src / "b" / "secret.jpg")
    os.chmod(src / "a" / "locked", 0)
    os.chmod(src / "b" / "secret.jpg", 0)
    try:
        done = convert_cli(src, tmp_path / "out", "--workers", "1", prefix=prefix)
        assert done.returncode == 0, done.stderr
        assert rejected_of(tmp_path / "out") == {"a/locked": "cannot list folder: EACCES (Permission denied)",
                                                 "b/secret.jpg": "cannot read: EACCES (Permission denied)"}
        strict = convert_cli(src, tmp_path / "strict", "--workers", "1", "--strict", prefix=prefix)
        assert strict.returncode == 1
        assert "Traceback" not in strict.stderr
        assert "rejected a/locked: cannot list folder: EACCES (Permission denied)" in strict.stderr.splitlines()
    finally:
        os.chmod(src / "a" / "locked", 0o755)
        os.chmod(src / "b" / "secret.jpg", 0o644)


def test_errors_seen_in_process_folder_listing_and_eio_are_named(tmp_path, monkeypatch, capsys):
    src = tmp_path / "src"
    jpeg(src / "a" / "sub" / "x.jpg")
    jpeg(src / "a" / "ok.jpg")
    jpeg(src / "b" / "bad-disk.jpg")
    unlistable, broken = os.fsencode(src / "a" / "sub"), os.fsencode(src / "b" / "bad-disk.jpg")
    real_scandir, real_read = os.scandir, source_reads.read_regular_file

    def scandir(path):
        if not isinstance(path, int) and os.fsencode(path) == unlistable:
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_scandir(path)

    def read(path, *limit, **root):
        if os.fsencode(path) == broken:
            raise OSError(errno.EIO, "Input/output error")
        return real_read(path, *limit, **root)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(source_reads, "read_regular_file", read)  # where image files are read
    assert main(["convert", "images", str(src), str(tmp_path / "out"), "--workers", "1", "--no-progress",
                 "--strict"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == ["rejected a/sub: cannot list folder: EACCES (Permission denied)",
                   "rejected b/bad-disk.jpg: cannot read: EIO (Input/output error)"]
    assert packed_paths(tmp_path / "out") == ["a/ok.jpg"]


NON_UTF8_CLASS = b"caf\xe9"  # Latin-1, not UTF-8
NON_UTF8_FILE = b"\xff\xfe-photo.jpg"


@pytest.fixture(scope="module")
def odd_names(tmp_path_factory) -> tuple[Path, Path]:
    """Classes ``caf\\xe9`` (colour 0) and ``plain`` (colour 1), with odd file names; converted."""
    src = tmp_path_factory.mktemp("odd") / "src"
    root = os.fsencode(src)
    for name in (NON_UTF8_FILE, b"back\\slash.jpg", b"new\nline.jpg", b"ok.jpg"):
        jpeg(os.path.join(root, NON_UTF8_CLASS, name), colour_of(0))
    jpeg(os.path.join(root, b"plain", NON_UTF8_FILE), colour_of(1))
    with open(os.path.join(root, b"plain", b"\xe9-broken.png"), "wb") as f:
        f.write(b"not an image")
    out = src.parent / "out"
    convert_images(ConvertImagesConfig(src=src, out=out, num_workers=1, progress=False))
    return src, out


def test_names_that_are_not_utf8_are_packed_losslessly_and_read_back(odd_names):
    src, out = odd_names
    folder, manifest = read_manifest(out)
    assert manifest.classes == ("caf\\xe9", "plain")
    paths = packed_paths(out)
    assert sorted(paths) == sorted(["caf\\xe9/\\xff\\xfe-photo.jpg", "caf\\xe9/back\\\\slash.jpg",
                                    "caf\\xe9/new\\x0aline.jpg", "caf\\xe9/ok.jpg", "plain/\\xff\\xfe-photo.jpg"])
    assert all(os.path.isfile(source_path(src, path)) for path in paths)  # each names its source file exactly
    assert rejected_of(out) == {"plain/\\xe9-broken.png": "cannot decode: UnidentifiedImageError: "
                                                          "cannot identify image file"}
    table = read_sample_table(folder / manifest.sample_table)
    with ImageLoader(out, batch_size=8, image_size=16, train=False, num_workers=1) as loader:
        for batch in loader.batches():
            for image, label, sample in zip(batch.images, batch.labels, batch.samples, strict=True):
                assert index_of(image.numpy()) == int(label) == int(table.label[sample])
                assert table.path(int(sample)).startswith(manifest.classes[int(label)] + "/")


def test_the_standard_bench_baseline_reads_such_trees(odd_names, tmp_path):
    src, out = odd_names
    assert main(["bench", "images", str(src), "--shards", str(out), "--loaders", "standard", "--epochs", "1",
                 "--warmup", "0", "--batch-size", "4", "--image-size", "16", "--workers", "1",
                 "--out", str(tmp_path)]) == 0


@pytest.mark.parametrize("raw", [b"plain/a.jpg", b"\xff", b"a\\b", b"\\x41", b"tab\there", "é/ü".encode(),
                                 b"\xed\xb2\x80", b"\\\\xff\xff", "nel\x85/ls\u2028".encode(), b"del\x7f"])
def test_escaped_paths_round_trip_and_are_one_line(raw):
    text = escape_path(raw)
    assert unescape_path(text) == raw
    assert text.isprintable() and text.encode("utf-8")  # one line, valid UTF-8 for JSON and Arrow strings


def test_escaped_paths_are_unambiguous_and_stay_inside_src():
    names = [b"\\x41", b"A", b"\\\\", b"\\", b"\xff", b"\\xff"]
    assert len({escape_path(n) for n in names}) == len(names)
    for bad in ("../x.jpg", "/etc/passwd", "a/../../x.jpg", "a\\q", ""):
        with pytest.raises(ValueError):
            source_path("/src", bad)


def _packed_mean(out: Path) -> dict[str, float]:
    folder, manifest = read_manifest(out)
    table = read_sample_table(folder / manifest.sample_table)
    means = {}
    for i in range(len(table)):
        with open(folder / manifest.shards[int(table.shard[i])].file, "rb") as f:
            f.seek(int(table.offset[i]))
            data = f.read(int(table.size[i]))
        means[table.path(i)] = float(np.asarray(Image.open(io.BytesIO(data))).mean())
    return means


def test_16_bit_and_float_images_are_scaled_not_clipped(tmp_path):
    src = tmp_path / "src" / "c"
    src.mkdir(parents=True)
    ramp = np.tile(np.linspace(0, 1, 256), (16, 1))
    Image.fromarray((ramp * 65535).round().astype(np.uint16)).save(src / "ramp16.png")  # mean 253 before
    Image.fromarray(ramp.astype(np.float32)).save(src / "float.tiff")  # black before
    Image.fromarray((ramp * 1000 - 200).astype(np.float32)).save(src / "float-wide.tiff")  # min-max
    Image.fromarray((ramp * 1e6).astype(np.int32)).save(src / "int32.tiff")  # beyond 16 bits: min-max
    convert_images(ConvertImagesConfig(src=src.parent, out=tmp_path / "out", num_workers=1, progress=False))
    means = _packed_mean(tmp_path / "out")
    assert set(means) == {"c/ramp16.png", "c/float.tiff", "c/float-wide.tiff", "c/int32.tiff"}
    for path, mean in means.items():
        assert abs(mean - 127.5) < 2, f"{path}: mean {mean:.1f}"


@pytest.mark.parametrize("mode, values, expected", [
    ("I;16", [0, 257, 65535], [0, 1, 255]),
    ("I", [0, 257, 65535], [0, 1, 255]),  # within 0..65535: 16-bit data
    ("I", [-10, 0, 10], [0, 128, 255]),  # outside: stretched
    ("F", [0.0, 0.5, 1.0], [0, 128, 255]),
    ("F", [float("nan"), 0.0, float("inf")], [0, 0, 255]),  # NaN 0; the range is 0..1
    ("F", [float("nan"), 2.0, 4.0], [0, 0, 255]),  # NaN to the low end of the stretched range
])
def test_the_8_bit_rule_per_mode(mode, values, expected):
    array = np.array([values], dtype={"I;16": np.uint16, "I": np.int32, "F": np.float32}[mode])
    image = Image.fromarray(array)
    assert image.mode == mode
    buffer = io.BytesIO()
    image.save(buffer, format="TIFF")
    prepared = prepare_image(buffer.getvalue(), ImagePrepareConfig(quality=100))
    assert isinstance(prepared, PreparedImage)
    pixels = np.asarray(Image.open(io.BytesIO(prepared.jpeg)).convert("L"))[0].astype(int)
    assert np.abs(pixels - np.array(expected)).max() <= 3, pixels


def test_webp_is_packed_when_pil_decodes_it_and_rejected_with_the_reason_otherwise(tmp_path, monkeypatch):
    src = tmp_path / "src" / "c"
    src.mkdir(parents=True)
    if features.check("webp"):
        Image.new("RGB", (16, 16), (1, 2, 3)).save(src / "a.webp")
    else:
        (src / "a.webp").write_bytes(b"RIFF\x00\x00\x00\x00WEBPVP8 ")
    jpeg(src / "b.jpg")
    summary = convert_images(ConvertImagesConfig(src=src.parent, out=tmp_path / "out", num_workers=1, progress=False))
    if features.check("webp"):
        assert summary.num_samples == 2 and not summary.rejected
    else:
        assert summary.num_samples == 1 and summary.rejected == ({"path": "c/a.webp", "reason": NO_WEBP},)
    monkeypatch.setattr(image_tree.features, "check", lambda name: False if name == "webp" else True)
    assert walk_image_tree(src.parent).rejected == [("c/a.webp", NO_WEBP)]


def test_rejected_jsonl_is_the_same_bytes_on_every_run(tmp_path):
    src = tmp_path / "src"
    for name in ("z", "a", "m"):
        (src / name).mkdir(parents=True)
        (src / name / "garbage.png").write_bytes(b"not an image")  # PIL's message names a BytesIO at an address
        (src / name / "empty.jpg").write_bytes(b"")
        (src / name / "truncated.jpg").write_bytes(b"\xff\xd8\xff\xe0" + bytes(100))
        jpeg(src / name / "sub" / "fine.jpg")
    with open(os.path.join(os.fsencode(src), b"m/sub/\xff.jpg"), "wb"):  # empty, named in bytes that are not UTF-8
        pass
    os.symlink("..", src / "a" / "sub" / "loop")
    outputs = []
    for run, workers in enumerate((1, 2, 1)):
        convert_images(ConvertImagesConfig(src=src, out=tmp_path / f"out{run}", num_workers=workers, progress=False))
        outputs.append((tmp_path / f"out{run}" / REJECTED_NAME).read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]
    rows = [json.loads(line) for line in outputs[0].decode().splitlines()]
    assert [r["path"] for r in rows] == sorted(r["path"] for r in rows) and len(rows) == 11
    assert b" at 0x" not in outputs[0]
    assert walk_image_tree(src) == walk_image_tree(src)  # the converter's resume fingerprint depends on this
