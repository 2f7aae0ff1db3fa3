"""Faults injected on purpose: broken samples and shards, bombs, dead workers, hostile tars, leaks, collisions."""

from __future__ import annotations

import gc
import io
import os
import resource
import shutil
import signal
import struct
import tarfile
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from dataio import ImageLoader
from dataio.cli import main
from dataio.errors import SampleError, ShardError, TooManyErrors, WorkerDied
from dataio.images.turbo_decode import decode_crop_into
from dataio.formats.images import image_convert
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.images.image_prepare import ImagePrepareConfig, Rejection, prepare_image
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.formats.dataset.verify import count_tar_samples, verify
from tests.conftest import NUM_COLOURED


def flip_first_byte(folder: Path, tmp_path: Path, samples: list[int]) -> tuple[Path, list[tuple[str, str]]]:
    """A copy of ``folder`` with one byte flipped (the JPEG SOI marker) in each of ``samples``."""
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    _, manifest = read_manifest(broken)
    table = read_sample_table(broken / manifest.sample_table)
    named = []
    for sample in samples:
        path = broken / manifest.shards[table.shard[sample]].file
        data = bytearray(path.read_bytes())
        data[int(table.offset[sample])] ^= 0xFF
        path.write_bytes(bytes(data))
        named.append((manifest.shards[table.shard[sample]].file, table.key(sample)))
    return broken, named


def test_flipped_byte_loses_only_that_sample_under_skip(coloured_shards, tmp_path):
    broken, [(shard, key)] = flip_first_byte(coloured_shards, tmp_path, [11])
    loader = ImageLoader(broken, batch_size=8, image_size=16, on_error="skip", num_workers=2)
    seen = [int(s) for batch in loader.batches() for s in batch.samples]
    assert sorted(seen) == sorted(set(range(NUM_COLOURED)) - {11})
    assert loader.stats.errors == [{"shard": shard, "key": key, "reason": loader.stats.errors[0]["reason"]}]
    with pytest.raises(SampleError, match=f"{key}.*{shard}"):
        list(ImageLoader(broken, batch_size=8, image_size=16, on_error="raise"))


def test_mostly_broken_data_stops_at_max_errors(coloured_shards, tmp_path):
    broken, _ = flip_first_byte(coloured_shards, tmp_path, list(range(0, NUM_COLOURED, 2)))
    loader = ImageLoader(broken, batch_size=8, image_size=16, on_error="skip", max_errors=3)
    with pytest.raises(TooManyErrors, match="max_errors=3"):
        list(loader)


def test_checksum_mismatch_is_named_before_reading(coloured_shards, tmp_path):
    broken, [(shard, _)] = flip_first_byte(coloured_shards, tmp_path, [3])
    with pytest.raises(ShardError, match=f"{shard}.*sha256"):
        ImageLoader(broken, verify_checksums=True)


def test_verify_names_each_bad_shard_and_sample(coloured_shards, tmp_path, capsys):
    assert main(["verify", str(coloured_shards), "--deep"]) == 0
    broken, [(shard, key)] = flip_first_byte(coloured_shards, tmp_path, [20])
    (broken / "shard-000000.tar").unlink()
    with open(broken / "shard-000004.tar", "r+b") as f:
        f.truncate(2048)
    assert main(["verify", str(broken), "--deep"]) == 1
    err = capsys.readouterr().err
    assert "shard-000000.tar: missing" in err and "shard-000004.tar" in err and "truncated" in err
    assert f"{shard}: sha256" in err and f"sample {key!r} in shard {shard}: cannot decode" in err
    assert not verify(broken).ok


def png_header_claiming(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims ``width`` x ``height`` pixels."""
    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def test_decompression_bombs_are_refused_with_bounded_memory():
    bomb = png_header_claiming(30000, 30000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = prepare_image(bomb, ImagePrepareConfig())
    assert isinstance(result, Rejection) and "decompression bomb" in result.reason
    limited = prepare_image(png_header_claiming(3000, 3000), ImagePrepareConfig(max_pixels=1_000_000))
    assert isinstance(limited, Rejection) and "3000x3000" in limited.reason and "limit 1000000" in limited.reason
    with pytest.raises(ValueError, match="decompression bomb"):  # the reader's decoder refuses it too
        decode_crop_into(png_header_claiming(20000, 20000), np.array([0, 0, 10, 10]), False,
                         np.zeros((8, 8, 3), np.uint8))
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 100  # decoding one would take 2.7 GB


def _die_on_cmyk(job):
    if "cmyk" in str(job[1]):
        os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer would
    return _original_prepare(job)


_original_prepare = image_convert._prepare_job


def test_a_dead_convert_worker_raises_within_seconds(image_folder, tmp_path, monkeypatch):
    monkeypatch.setattr(image_convert, "_prepare_job", _die_on_cmyk)  # forked workers inherit it
    started = time.monotonic()
    with pytest.raises(WorkerDied, match="died"):
        convert_images(ConvertImagesConfig(src=image_folder[0], out=tmp_path / "out", num_workers=2, progress=False,
                                           max_shard_samples=4))
    assert time.monotonic() - started < 30
    assert not list((tmp_path / "out").glob(".shard-*")), "a partial shard was left behind"


def test_hostile_tar_members_are_listed_never_written(tmp_path, monkeypatch):
    shard = tmp_path / "evil.tar"
    with tarfile.open(shard, "w") as tar:
        for name in ("../escaped.jpg", "/tmp/dataio-absolute.jpg", "ok.jpg", "ok.weird-extension", "noext"):
            info = tarfile.TarInfo(name)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"abc"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    before = set(os.listdir(tmp_path)), os.path.exists("/tmp/dataio-absolute.jpg")
    assert count_tar_samples(shard) == 3  # '../escaped', '/tmp/dataio-absolute', 'ok': counted, not extracted
    assert (set(os.listdir(tmp_path)), os.path.exists("/tmp/dataio-absolute.jpg")) == before
    assert not os.listdir(work)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_rss_after_50_epochs_stays_within_a_bound_of_rss_after_2(coloured_shards):
    loader = ImageLoader(coloured_shards, batch_size=8, image_size=32, num_workers=2)
    for _ in range(2):
        for _batch in loader:
            pass
    gc.collect()
    after_two = _rss_mb()
    for _ in range(48):
        for _batch in loader:
            pass
    gc.collect()
    growth = _rss_mb() - after_two
    loader.close()
    assert growth < 8, f"RSS grew {growth:.1f} MB over 48 more epochs"


def test_close_and_ctrl_c_leave_no_threads_shm_or_temp_files(coloured_shards, tmp_path):
    shm_before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    threads_before = {t.name for t in threading.enumerate()}
    files_before = sorted(p.name for p in coloured_shards.iterdir())
    with pytest.raises(KeyboardInterrupt):
        with ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=2) as loader:
            for index, _ in enumerate(loader):
                if index == 2:
                    raise KeyboardInterrupt  # Ctrl-C mid-epoch
    time.sleep(0.1)
    leftover = {t.name for t in threading.enumerate()} - threads_before
    assert not [name for name in leftover if name.startswith("dataio")]
    assert (set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()) == shm_before
    assert sorted(p.name for p in coloured_shards.iterdir()) == files_before


def test_two_loaders_on_one_host_do_not_interfere(coloured_shards):
    def read_all(results: list, seed: int) -> None:
        loader = ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=2, seed=seed)
        results.extend((b.samples.tolist(), b.images.sum().item()) for b in loader.batches())
        loader.close()

    alone: dict[int, list] = {0: [], 1: []}
    for seed in (0, 1):
        read_all(alone[seed], seed)
    together: dict[int, list] = {0: [], 1: []}
    threads = [threading.Thread(target=read_all, args=(together[seed], seed)) for seed in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert together == alone
