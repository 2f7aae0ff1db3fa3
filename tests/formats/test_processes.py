"""Processes behave (issue 16 §5): Ctrl-C, SIGKILL of the parent, two converters on one OUT, disk full, long documents."""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataio.formats import file_gate
from dataio.formats.errors import OutputError
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.images.synthetic import SyntheticImagesConfig, write_image_folder
from dataio.formats.text.tokenizer_setup import TokenizerConfig, train_bpe
from dataio.formats.worker_pool import ordered_map

CONVERT = ["convert", "images", "--workers", "2", "--max-shard-samples", "10", "--no-progress"]


def start(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dataio", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def children(pid: int) -> set[int]:
    """Processes whose parent is ``pid``, from /proc."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def wait_for_workers(process: subprocess.Popen, count: int = 2, timeout: float = 30) -> set[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = children(process.pid)
        if len(workers) >= count:
            return workers
        time.sleep(0.05)
    raise AssertionError("the converter started no workers")


def tree_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def big_folder(tmp_path_factory) -> Path:
    """Enough images for a conversion that takes a few seconds with two workers."""
    root = tmp_path_factory.mktemp("many")
    write_image_folder(root / "src", SyntheticImagesConfig(num_classes=4, images_per_class=120, seed=5))
    return root


def test_ctrl_c_stops_within_seconds_and_the_rerun_resumes(big_folder):
    reference = subprocess.run([sys.executable, "-m", "dataio", *CONVERT, "src", "whole"], cwd=big_folder,
                               capture_output=True, text=True)
    assert reference.returncode == 0, reference.stderr
    interrupted, finished = 0, False
    for attempt, delay in enumerate((0.1, 0.3, 0.6)):
        process = start(*CONVERT, "src", "cut", cwd=big_folder)
        wait_for_workers(process)
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        sent = time.monotonic()
        try:
            _, stderr = process.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            raise AssertionError(f"attempt {attempt}: still running 5 s after Ctrl-C")
        if process.returncode == 0:  # it finished before the signal landed: nothing more to interrupt
            finished = True
            break
        assert time.monotonic() - sent < 5
        assert process.returncode == 130, stderr
        assert stderr.strip().splitlines() == ["dataio convert: interrupted; rerun the same command to resume"]
        assert not children(process.pid)
        interrupted += 1
    assert interrupted >= 2, "the conversion finished before Ctrl-C: make the folder bigger"
    if not finished:
        rerun = subprocess.run([sys.executable, "-m", "dataio", *CONVERT, "src", "cut"], cwd=big_folder,
                               capture_output=True, text=True)
        assert rerun.returncode == 0, rerun.stderr
    assert tree_bytes(big_folder / "cut") == tree_bytes(big_folder / "whole")


def test_sigkill_of_the_parent_leaves_no_workers(big_folder):
    process = start(*CONVERT, "src", "killed", cwd=big_folder)
    workers = wait_for_workers(process)
    process.kill()
    process.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in workers):
        time.sleep(0.05)
    alive = [pid for pid in workers if Path(f"/proc/{pid}").exists()
             and "Z" not in (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:1] or [""])[0]]
    assert not alive, f"workers {alive} outlived their parent"


def test_a_second_converter_is_refused_and_the_first_finishes(big_folder):
    first = start(*CONVERT, "src", "shared", cwd=big_folder)
    wait_for_workers(first)
    first.send_signal(signal.SIGSTOP)  # held mid-conversion, its lock taken, however fast this machine is
    try:
        second = subprocess.run([sys.executable, "-m", "dataio", *CONVERT, "--overwrite", "src", "shared"],
                                cwd=big_folder, capture_output=True, text=True, timeout=60)
    finally:
        first.send_signal(signal.SIGCONT)
    _, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, stderr
    assert second.returncode == 2 and len(second.stderr.strip().splitlines()) == 1
    assert "being written by another dataio process" in second.stderr
    verify = subprocess.run([sys.executable, "-m", "dataio", "verify", "shared"], cwd=big_folder,
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert not (big_folder / "shared" / ".dataio.lock").exists()


class _FullDisk:
    """A file whose writes fail with ENOSPC once ``room`` bytes are written, as on a full disk."""

    def __init__(self, file, room: list[int]) -> None:
        self._file, self._room = file, room

    def write(self, data) -> int:
        if len(data) > self._room[0]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._room[0] -= len(data)
        return self._file.write(data)

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *rest) -> None:
        self._file.close()


class _OsOfAFullDisk:
    """The gate's ``os`` (issue 42: every file dataio writes opens there), whose ``fdopen`` gives ``_FullDisk``
    files: shards' temp files, the sample table and the manifest alike."""

    def __init__(self, room: list[int]) -> None:
        self._room = room

    def fdopen(self, *args, **kwargs):
        return _FullDisk(os.fdopen(*args, **kwargs), self._room)

    def __getattr__(self, name):
        return getattr(os, name)


@pytest.mark.parametrize("room", [30_000, 300_000])
def test_a_full_disk_is_one_error_naming_the_file_and_leaves_nothing_half_written(image_folder, tmp_path,
                                                                                   monkeypatch, room):
    left = [room]
    monkeypatch.setattr(file_gate, "os", _OsOfAFullDisk(left))
    out = tmp_path / "out"
    with pytest.raises(OutputError, match=r"cannot write .*out/.*: No space left on device") as raised:
        convert_images(ConvertImagesConfig(src=image_folder[0], out=out, max_shard_samples=4, num_workers=1,
                                           progress=False))
    assert "\n" not in str(raised.value)
    assert not [p.name for p in out.iterdir() if ".partial" in p.name or ".tmp-" in p.name or p.name == "manifest.json"]
    monkeypatch.undo()
    summary = convert_images(ConvertImagesConfig(src=image_folder[0], out=out, max_shard_samples=4, num_workers=1,
                                                 progress=False))  # with room again, the rerun resumes and finishes
    assert summary.num_samples > 0 and (out / "manifest.json").is_file()


def test_a_real_full_file_system_is_one_line_and_exit_1(image_folder, tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mount)],
                                           capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (not root); the monkeypatched test above covers ENOSPC")
    try:
        result = subprocess.run([sys.executable, "-m", "dataio", "convert", "images", str(image_folder[0]),
                                 str(mount / "out"), "--workers", "1", "--max-shard-samples", "4", "--no-progress"],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "No space left on device" in result.stderr
        leftovers = [p.name for p in (mount / "out").iterdir() if ".partial" in p.name or ".tmp-" in p.name]
        assert not leftovers
    finally:
        subprocess.run(["umount", str(mount)], check=False)


_PEAK = ("import resource, sys\nfrom dataio.cli import main\nrc = main(sys.argv[1:])\n"
         "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, file=sys.stderr)\nsys.exit(rc)\n")


def test_a_long_single_line_document_needs_bounded_memory(tmp_path):
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 9))) for _ in range(500)]
    tokenizer = train_bpe([" ".join(words)], TokenizerConfig(train="bpe", vocab_size=400))
    tokenizer.save(str(tmp_path / "tok.json"))
    (tmp_path / "small.txt").write_text("a short document\n")
    (tmp_path / "long.txt").write_text(" ".join(rng.choice(words) for _ in range(700_000)) + "\n")  # ~4 MB
    peaks = {}
    for name in ("small", "long"):
        result = subprocess.run([sys.executable, "-c", _PEAK, "convert", "text", f"{name}.txt", f"out-{name}",
                                 "--tokenizer", "tok.json", "--no-progress"], cwd=tmp_path, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        peaks[name] = int(result.stderr.strip().splitlines()[-1])
    # encoded whole, the 4 MB line took ~780 MB more than the small run; in pieces ~110 MB
    assert peaks["long"] - peaks["small"] < 300, peaks


def _first_byte(data: bytes) -> int:
    return data[0]


def test_large_items_are_bounded_in_bytes_and_never_deadlock():
    """40 items of 5 MB over 2 workers: results come back in order while items are still being sent (the
    pipes hold 64 KB), and no more than window x chunk_bytes per worker (32 MB: ~7 items) wait at a time;
    counted by chunks only, 4 x 2 chunks of 8 items (all 40, 200 MB) were taken ahead."""
    taken = 0

    def items():
        nonlocal taken
        for i in range(40):
            taken += 1
            yield bytes([i]) * (5 << 20)

    ahead, results = [], []
    for result in ordered_map(_first_byte, items(), 2, chunk_size=8, chunk_bytes=4 << 20, window=4):
        results.append(result)
        ahead.append(taken - len(results))
    assert results == list(range(40))
    assert max(ahead) <= 8, ahead


def test_ctrl_c_during_a_parquet_conversion_of_real_size_photos(real_photos, tmp_path):
    """Image bytes go through the job pipes (written by the sender thread): Ctrl-C still stops at once, with
    the one line and no traceback from that thread, and leaves no worker."""
    photos = sorted(real_photos.rglob("*.JPEG")) * 4  # ~40 MB, 8 of them camera photos: seconds of work
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    images = pa.array([{"bytes": p.read_bytes(), "path": p.name} for p in photos], image_type)
    pq.write_table(pa.table({"image": images, "label": pa.array([i % 2 for i in range(len(photos))])}),
                   tmp_path / "train.parquet", row_group_size=8)
    process = start(*CONVERT, "train.parquet", "out", cwd=tmp_path)
    wait_for_workers(process)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        _, stderr = process.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError("still running 5 s after Ctrl-C")
    assert time.monotonic() - sent < 5
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines() == ["dataio convert: interrupted; rerun the same command to resume"]
    assert not children(process.pid)
