"""Remote reads under faults (issue 25, cases 1-3), run the way a user meets them.

1. A stalled object store: moto runs in its own process, frozen with
   SIGSTOP mid-epoch; the loader script (a subprocess) raises one line
   naming the URL and the whole process exits in bounded time, the store
   still frozen. A store that accepts connections and never answers: every
   entry point (loaders, ``dataio verify``, ``dataio train``) ends in
   bounded time with one line naming the URL.
2. A damaged cache: a cached range (or a cached token shard) whose bytes
   were damaged is discarded with a warning naming the cache file and read
   again from the source; only a damaged source is a damaged shard.
3. One cache_dir shared by several processes, started together, with a
   cache smaller than the data: all exit 0 with the local read's results.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from dataio import ImageLoader, TextLoader
from dataio.formats.errors import SampleError
from dataio.formats.files import sha256_file
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.dataset.manifest import ManifestError, read_manifest
from dataio.formats.remote.storage import RetryPolicy
from dataio.formats.images.synthetic import SyntheticImagesConfig, write_image_folder
from dataio.remote.range_cache import RangeCache
from dataio.formats.dataset.verify import verify
from tests.remote.conftest import KEY, S3, SECRET

ROOT = Path(__file__).resolve().parents[2]
AWS_ENV = {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
           "AWS_CONFIG_FILE": "/nonexistent"}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, **AWS_ENV, "PYTHONPATH": str(ROOT)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StoppableS3(S3):
    """moto's server in a process of its own, so that it can be frozen (SIGSTOP) like a stalled store."""

    def __init__(self) -> None:  # not S3.__init__: no server thread in this process
        port = _free_port()
        self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
        self.endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert self.process.poll() is None and time.monotonic() < deadline, "moto server did not start"
                time.sleep(0.1)

    def freeze(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def frozen(self) -> bool:
        """Whether the server process is stopped (state T in /proc)."""
        return Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"

    def stop(self) -> None:
        self.thaw()
        self.process.kill()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def stoppable_s3() -> Iterator[StoppableS3]:
    server = StoppableS3()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def frozen_url(stoppable_s3, real_photo_shards) -> str:
    """real_photo_shards on the server that the tests freeze."""
    return stoppable_s3.upload(real_photo_shards)


def _storage_options(server: S3) -> dict:
    """Only the endpoint and credentials: the timeouts are the loader's (``remote_timeout``)."""
    return {"key": KEY, "secret": SECRET, "client_kwargs": {"endpoint_url": server.endpoint}}


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """An address that accepts connections (the kernel's backlog) and never answers, like a stalled store."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


# -- 1. a stalled store ----------------------------------------------------------------------------------------

STALL_SCRIPT = textwrap.dedent("""
    import json, sys, time
    from dataio import ImageLoader
    url, options = sys.argv[1], json.loads(sys.argv[2])

    def started():
        loader = ImageLoader(url, batch_size=2, image_size=32, num_workers=2, readahead_batches=1, **options)
        batches = iter(loader)
        next(batches)
        deadline = time.monotonic() + 30  # the fetches started so far, of batches 0-2 (2 samples each), are in
        while loader.files.requests < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        return loader, batches

    (loader, batches), (left, left_batches) = started(), started()
    print("ready", flush=True)
    sys.stdin.readline()  # the store is frozen now
    next(left_batches), next(left_batches)  # decoded already; the next batches wait on frozen reads
    deadline = time.monotonic() + 10
    while not left.files.waiting() and time.monotonic() < deadline:
        time.sleep(0.01)
    print(left.files.waiting(), flush=True)  # this loader is never closed: its reads are in flight at exit
    try:
        for _ in batches:
            pass
    except Exception as error:
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        started = time.monotonic()
        loader.close()
        print(f"closed in {time.monotonic() - started:.2f} s", flush=True)
        sys.exit(1)
""")


def test_a_frozen_store_ends_the_job_in_bounded_time(stoppable_s3, frozen_url):
    """A loader with timeout=5 (its reads would wait 2 x 20 s: the default remote_timeout, retries=1) raises
    one line naming the URL after 5 s; close() returns at once; the script exits at once, though a second
    loader, never closed, has reads in flight on the frozen store."""
    url = frozen_url
    options = {"storage_options": _storage_options(stoppable_s3), "retries": 1, "timeout": 5}
    child = subprocess.Popen([sys.executable, "-c", STALL_SCRIPT, url, json.dumps(options)], cwd=ROOT, env=_env(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "ready\n"
        stoppable_s3.freeze()
        frozen_at = time.monotonic()
        child.stdin.write("\n")
        child.stdin.flush()
        try:
            out, err = child.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
        elapsed = time.monotonic() - frozen_at
        assert stoppable_s3.frozen()  # nothing was let go by the store: the job ended on its own
    finally:
        stoppable_s3.thaw()
        if child.poll() is None:
            child.kill()
            child.wait()
    assert elapsed < 30, f"the job took {elapsed:.0f} s to end after the store froze (stdout {out!r}, stderr {err!r})"
    assert child.returncode == 1
    assert f"waiting on a read of {url}/shard-" in out  # the unclosed loader's reads were in flight at exit
    lines = err.splitlines()
    assert len(lines) == 1, err  # one line, no traceback, nothing printed at exit
    assert lines[0].startswith(f"BatchTimeout: {url}: timed out after 5 seconds waiting for a batch")
    assert f"waiting on a read of {url}/shard-" in lines[0]
    assert elapsed >= 5 and float(out.split("closed in ")[1].split()[0]) < 2.0
    assert SECRET not in err


def test_a_frozen_read_is_retried_then_named(stoppable_s3, frozen_url):
    """No timeout=: each read gives up after remote_timeout=1 s, is retried once, then is a SampleError naming
    the URL, shard and key; close() does not wait for the reads still in flight."""
    loader = ImageLoader(frozen_url, storage_options=_storage_options(stoppable_s3), remote_timeout=1, retries=1,
                         retry_backoff=0.1, batch_size=2, image_size=32, num_workers=2, readahead_batches=1)
    batches = loader.batches()
    next(batches)
    stoppable_s3.freeze()
    try:
        started = time.monotonic()
        with pytest.raises(SampleError) as error:
            for _ in batches:
                pass
        assert time.monotonic() - started < 15  # 2 attempts of 1 s per read, the ranges of a batch at once
        started = time.monotonic()
        loader.close()
        assert time.monotonic() - started < 2
        assert stoppable_s3.frozen()
    finally:
        stoppable_s3.thaw()
    message = str(error.value)
    assert f"in shard {frozen_url}/shard-" in message and "ReadTimeoutError" in message
    assert "after 2 attempts" in message and "\n" not in message


@pytest.mark.parametrize("scheme", ["http", "s3"])
def test_a_store_that_never_answers_is_named_in_bounded_time(silent_endpoint, scheme):
    """Connect and read timeouts reach the backend (aiohttp's ClientTimeout, botocore's config): no hang."""
    if scheme == "http":
        url, options = f"{silent_endpoint}/out", None
    else:
        url, options = "s3://bucket/out", {"key": KEY, "secret": SECRET, "client_kwargs": {"endpoint_url": silent_endpoint}}
    for make in (lambda: ImageLoader(url, storage_options=options, remote_timeout=1, retries=1, retry_backoff=0.1),
                 lambda: TextLoader(url, storage_options=options, remote_timeout=1, retries=1, retry_backoff=0.1),
                 lambda: verify(url, storage_options=options, retry=RetryPolicy(attempts=2, backoff=0.1), timeout=1)):
        started = time.monotonic()
        with pytest.raises(ManifestError) as error:
            make()
        assert time.monotonic() - started < 10  # 2 attempts of 1 s, not the backends' own retries of minutes
        message = str(error.value)
        assert f"{url}/manifest.json: cannot read" in message and "imeout" in message and "\n" not in message


@pytest.mark.parametrize("command", ["verify", "train"])
def test_cli_on_a_store_that_never_answers_is_one_line_in_bounded_time(silent_endpoint, tmp_path, command):
    """``dataio verify s3://`` and ``dataio train --train s3://`` end with one line (5 attempts of 1 s here)."""
    url = "s3://bucket/out"
    flags = ["--storage-option", f"client_kwargs.endpoint_url={silent_endpoint}",
             "--storage-option", "config_kwargs.connect_timeout=1", "--storage-option", "config_kwargs.read_timeout=1"]
    argv = [command, url] if command == "verify" else [
        "train", "--train", url, "--out", str(tmp_path / "run"), "--model", "small_cnn", "--epochs", "1"]
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "dataio", *argv, *flags], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert time.monotonic() - started < 40  # 5 attempts of 1 s and the backoff, not 5 x 5 x 5 botocore/s3fs tries
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and f"{url}/manifest.json: cannot read" in done.stderr, done.stderr
    assert "ReadTimeoutError" in done.stderr


# -- 2. the cache is a cache ------------------------------------------------------------------------------------

def _flip_byte(path: Path, at: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    at = len(data) // 2 if at is None else at
    data[at] ^= 0x5A
    path.write_bytes(bytes(data))


def _epoch(loader: ImageLoader) -> tuple[list[int], torch.Tensor, list[int]]:
    batches = list(loader.batches())
    return (np.concatenate([b.samples for b in batches]).tolist(), torch.cat([b.images for b in batches]),
            torch.cat([b.labels for b in batches]).tolist())


IMAGE_OPTIONS = dict(batch_size=4, image_size=32, train=False, num_workers=2)


def test_a_damaged_cached_range_is_fetched_again_with_a_warning(s3, real_photo_shards, tmp_path, caplog):
    url = s3.upload(real_photo_shards)
    options = dict(IMAGE_OPTIONS, storage_options=s3.options(), cache_dir=tmp_path / "cache")
    with ImageLoader(url, **options) as loader:
        expected = _epoch(loader)
        cache = loader.files.cache
    victim = sorted(cache.folder.iterdir())[0]
    good = victim.read_bytes()
    _flip_byte(victim)  # same size, other bytes: bit rot, a torn write
    caplog.set_level(logging.WARNING, logger="dataio")
    with ImageLoader(url, **options) as loader:  # on_error="raise": a damaged cache must not fail a sample
        for epoch in range(2):
            loader.set_epoch(0)
            got = _epoch(loader)
            assert got[0] == expected[0] and got[2] == expected[2] and torch.equal(got[1], expected[1])
        assert loader.files.requests == 1  # that range alone, once: the bad copy was replaced
        assert loader.stats.errors == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(victim) in warnings[0] and "damaged cache file" in warnings[0]
    assert victim.read_bytes() == good


def test_a_damaged_source_is_named_as_the_shard_and_never_cached(s3, real_photo_shards, tmp_path):
    url = s3.upload(real_photo_shards)
    with ImageLoader(real_photo_shards) as local:
        sample = int(np.argmax(local.table.size))  # the largest: a camera photo
        shard = local.manifest.shards[int(local.table.shard[sample])].file
        offset, size = int(local.table.offset[sample]), int(local.table.size[sample])
    damaged = tmp_path / shard
    damaged.write_bytes((real_photo_shards / shard).read_bytes())
    _flip_byte(damaged, offset + size // 2)
    s3.fs().put_file(str(damaged), f"{url.removeprefix('s3://')}/{shard}")
    options = dict(IMAGE_OPTIONS, storage_options=s3.options(), cache_dir=tmp_path / "cache", on_error="skip")
    with ImageLoader(url, **options) as loader:
        samples, _, _ = _epoch(loader)
        assert sample not in samples and len(samples) == len(loader.table) - 1
        [error] = loader.stats.errors
        assert error["shard"] == f"{url}/{shard}" and "checksum mismatch" in error["reason"]
        assert not loader.files.cache.path(shard, offset, size).exists()  # never served from the cache
        assert len(list(loader.files.cache.folder.iterdir())) == len(loader.table) - 1


def test_a_damaged_cached_token_shard_is_downloaded_again_with_a_warning(s3, text_shards, tmp_path, caplog):
    url = s3.upload(text_shards)
    options = dict(mode="budget", max_tokens=512, seed=3)
    with TextLoader(text_shards, **options) as local:
        expected = [{k: v.numpy().copy() for k, v in b.items()} for b in local]
    with TextLoader(url, storage_options=s3.options(), cache_dir=tmp_path / "cache", **options):
        pass
    _, manifest = read_manifest(text_shards)
    [copy] = list((tmp_path / "cache").iterdir())
    victim = copy / manifest.shards[0].file
    _flip_byte(victim)
    caplog.set_level(logging.WARNING, logger="dataio")
    with TextLoader(url, storage_options=s3.options(), cache_dir=tmp_path / "cache", **options) as remote:
        got = [{k: v.numpy().copy() for k, v in b.items()} for b in remote]
    assert len(got) == len(expected)
    assert all(a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
               for a, b in zip(got, expected, strict=True))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(victim) in warnings[0] and "damaged cache file" in warnings[0]
    assert sha256_file(victim) == manifest.shards[0].sha256


# -- 3. one cache_dir, several processes -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def photo_shards(tmp_path_factory) -> Path:
    """40 photos of ImageNet size (~110 KB) in 4 classes, converted: 4.4 MB, many ranges."""
    root = tmp_path_factory.mktemp("photos40")
    write_image_folder(root / "src", SyntheticImagesConfig(num_classes=4, images_per_class=10, seed=21,
                                                           photo_class="imagenet"))
    convert_images(ConvertImagesConfig(src=root / "src", out=root / "out", shard_size="1MB", num_workers=1,
                                       progress=False))
    return root / "out"


IMAGE_WORKER = textwrap.dedent("""
    import hashlib, json, sys
    from dataio import ImageLoader
    url, options = sys.argv[1], json.loads(sys.argv[2])
    results = []
    with ImageLoader(url, **options) as loader:
        for epoch in range(2):
            loader.set_epoch(epoch)
            for batch in loader.batches():
                results.append([batch.samples.tolist(), batch.labels.tolist(),
                                hashlib.sha256(batch.images.numpy().tobytes()).hexdigest()])
    print(json.dumps(results))
""")


def _run_together(script: str, argvs: list[list[str]]) -> list[subprocess.CompletedProcess]:
    children = [subprocess.Popen([sys.executable, "-c", script, *argv], cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for argv in argvs]
    done = []
    for child in children:
        try:
            out, err = child.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
        done.append(subprocess.CompletedProcess(child.args, child.returncode, out, err))
    return done


def test_ranks_sharing_one_range_cache_smaller_than_the_data(s3, photo_shards, tmp_path):
    """3 ranks of one node (3 processes, started together, each reading its share of 2 epochs) and one cache_dir
    of a sixth of the data: all exit 0, stderr empty, the batches of a local read; the folder stays bounded
    by the limit of all of them together (each rank alone would fill it)."""
    url = s3.upload(photo_shards)
    ranks = 3
    options = dict(IMAGE_OPTIONS, train=True, seed=7, world_size=ranks)
    expected = []
    for rank in range(ranks):
        results = []
        for epoch in range(2):
            with ImageLoader(photo_shards, rank=rank, **options) as local:
                local.set_epoch(epoch)
                results += [[b.samples.tolist(), b.labels.tolist(),
                             hashlib.sha256(b.images.numpy().tobytes()).hexdigest()] for b in local.batches()]
                sizes = local.table.size
        expected.append(results)
    limit = int(sizes.sum()) // 6
    options.update(storage_options=s3.options(), cache_dir=str(tmp_path / "cache"), cache_limit=limit)
    argvs = [[url, json.dumps(dict(options, rank=rank))] for rank in range(ranks)]
    for rank, child in enumerate(_run_together(IMAGE_WORKER, argvs)):
        assert child.returncode == 0 and child.stderr == "", child.stderr[-3000:]
        assert json.loads(child.stdout) == expected[rank]
    [folder] = list((tmp_path / "cache").iterdir())
    assert not any(p.name.startswith(".") for p in folder.iterdir())  # no temporary file left
    held = sum(p.stat().st_size for p in folder.iterdir())
    assert limit * 0.5 < held <= limit * (1 + ranks / 10)  # each rank's share of an epoch is more than the limit


def test_a_starting_cache_leaves_the_files_of_live_writers_alone(tmp_path):
    """A loader starting on a shared folder removes only stale temporary files (a killed writer's), never those
    another process is writing now; a range removed by another process is a miss, then cached again."""
    folder = tmp_path / "cache"
    folder.mkdir()
    live = folder / ".shard-000000.tar@0+4.4242-140-0a1b2c3d.partial"
    stale = folder / ".shard-000000.tar@4+4.4243-140-0a1b2c3d.partial"
    for path in (live, stale):
        path.write_bytes(b"abcd")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    cache = RangeCache(folder, limit=100)
    assert live.exists() and not stale.exists()
    cache.put("shard-000000.tar", 8, 4, b"wxyz")
    cache.path("shard-000000.tar", 8, 4).unlink()  # evicted by another process
    assert cache.get("shard-000000.tar", 8, 4) is None and cache.total == 0
    other = RangeCache(folder, limit=100)  # another process's cache on the same folder
    other.put("shard-000000.tar", 8, 4, b"wxyz")
    assert cache.get("shard-000000.tar", 8, 4) == b"wxyz"  # its ranges are this one's hits


TEXT_WORKER = textwrap.dedent("""
    import json, sys
    from dataio import TextLoader
    url, options = sys.argv[1], json.loads(sys.argv[2])
    with TextLoader(url, **options) as loader:
        print(json.dumps([{k: v.tolist() for k, v in batch.items()} for batch in loader]))
""")


def test_processes_sharing_one_text_cache(s3, text_shards, tmp_path):
    url = s3.upload(text_shards)
    options = dict(mode="budget", max_tokens=512, seed=3)
    with TextLoader(text_shards, **options) as local:
        expected = [{k: v.tolist() for k, v in batch.items()} for batch in local]
    options.update(storage_options=s3.options(), cache_dir=str(tmp_path / "cache"))
    for child in _run_together(TEXT_WORKER, [[url, json.dumps(options)]] * 3):
        assert child.returncode == 0 and child.stderr == "", child.stderr[-3000:]
        assert json.loads(child.stdout) == expected
    [copy] = list((tmp_path / "cache").iterdir())
    assert not any(p.name.startswith(".") for p in copy.iterdir())


class _NoRangeHandler(http.server.SimpleHTTPRequestHandler):
    """Python's own static server: answers a Range request with the whole file (HTTP 200)."""

    def log_message(self, *args) -> None:  # quiet
        pass


def test_a_server_that_ignores_range_requests_is_named_as_such(image_shards):
    """Found by a user following the docs with ``python -m http.server``: each read got the whole shard and was
    reported as a "short read ... (shard replaced?)" with more bytes than asked for."""
    import functools
    import threading

    handler = functools.partial(_NoRangeHandler, directory=str(image_shards.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{image_shards.name}"
        with ImageLoader(url, batch_size=4, image_size=32, num_workers=1, retries=0) as loader:
            with pytest.raises(Exception) as caught:
                next(iter(loader))
    finally:
        server.shutdown()
        server.server_close()
    message = str(caught.value)
    assert "the server ignores HTTP Range requests" in message and "shard replaced" not in message, message
