"""ImageLoader over shards on S3 (moto on loopback) and HTTP: the same batches as local, by ranges."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from dataio import ImageLoader
from dataio.formats.errors import SampleError, ShardError
from dataio.formats.dataset.manifest import ManifestError, read_manifest
from dataio.formats.remote.storage import redact
from tests.remote.conftest import S3, SECRET

OPTIONS = dict(batch_size=8, image_size=32, train=True, seed=5, num_workers=2)


def _epoch(loader: ImageLoader) -> tuple[list[int], torch.Tensor, list[int]]:
    batches = list(loader.batches())
    samples = np.concatenate([b.samples for b in batches]).tolist()
    return samples, torch.cat([b.images for b in batches]), torch.cat([b.labels for b in batches]).tolist()


def test_s3_batches_match_local_and_are_ranges(s3, s3_images, image_shards):
    with ImageLoader(image_shards, **OPTIONS) as local:
        expected = _epoch(local)
    with ImageLoader(s3_images, storage_options=s3.options(), **OPTIONS) as remote:
        got = _epoch(remote)
        assert remote.files.requests == len(expected[0])  # one range per sample, nothing more
        fetched = remote.files.bytes_fetched
    assert got[0] == expected[0] and got[2] == expected[2]
    assert torch.equal(got[1], expected[1])
    _, manifest = read_manifest(image_shards)
    assert fetched < sum(s.bytes for s in manifest.shards)  # headers, padding and the idx files never read


def test_a_subset_reads_only_its_ranges(s3, s3_images, image_shards):
    _, manifest = read_manifest(image_shards)
    with ImageLoader(s3_images, storage_options=s3.options(), world_size=4, rank=1, **OPTIONS) as remote:
        samples, _, labels = _epoch(remote)
        assert remote.files.requests == len(samples)
        assert remote.files.bytes_fetched < sum(s.bytes for s in manifest.shards) / 3
        assert labels == remote.table.label[samples].tolist()


def test_second_epoch_from_cache_makes_no_network_reads(s3, s3_images, tmp_path):
    options = dict(OPTIONS, storage_options=s3.options(), cache_dir=tmp_path / "cache")
    with ImageLoader(s3_images, **options) as loader:
        first = _epoch(loader)
        requests = loader.files.requests
        assert requests == len(first[0])
        loader.set_epoch(0)
        again = _epoch(loader)
        assert loader.files.requests == requests  # every range from the cache
    assert again[0] == first[0] and torch.equal(again[1], first[1])
    with ImageLoader(s3_images, **options) as fresh:  # a new process would find the cache too
        _epoch(fresh)
        assert fresh.files.requests == 0


def test_cache_stays_within_its_limit(s3, s3_images, image_shards, tmp_path):
    with ImageLoader(image_shards) as local:
        limit = int(np.max(local.table.size)) * 3
    with ImageLoader(s3_images, storage_options=s3.options(), cache_dir=tmp_path, cache_limit=limit,
                     **OPTIONS) as loader:
        samples, _, _ = _epoch(loader)
        cache = loader.files.cache
        assert 0 < cache.total <= limit
        assert sum(p.stat().st_size for p in cache.folder.iterdir()) == cache.total
    assert int(loader.table.size[samples].sum()) > 2 * limit  # so most was evicted


def test_http_server_with_ranges(http_root, image_shards):
    from tests.remote.conftest import RangeHandler

    with ImageLoader(image_shards, **OPTIONS) as local:
        expected = _epoch(local)
    RangeHandler.requests_seen.clear()
    with ImageLoader(http_root, **OPTIONS) as remote:
        got = _epoch(remote)
    assert got[0] == expected[0] and got[2] == expected[2] and torch.equal(got[1], expected[1])
    ranged = [r for r in RangeHandler.requests_seen if r.startswith("bytes=")]
    assert len(ranged) >= len(expected[0])


def test_server_stopped_mid_epoch_is_a_named_error_not_a_hang(image_shards):
    server = S3()
    try:
        url = server.upload(image_shards)
        loader = ImageLoader(url, storage_options=server.options(), retries=2, retry_backoff=0.05,
                             readahead_batches=1, **OPTIONS)
        batches = loader.batches()
        next(batches)
    finally:
        server.stop()
    start = time.monotonic()
    with pytest.raises(SampleError) as error:
        for _ in batches:
            pass
    assert time.monotonic() - start < 60
    message = str(error.value)
    assert url.removeprefix("s3://") in message and "shard-" in message and "after 3 attempts" in message
    assert SECRET not in message
    loader.close()


def test_shard_deleted_remotely(s3, image_shards):
    url = s3.upload(image_shards)
    fs = s3.fs()
    _, manifest = read_manifest(image_shards)
    loader = ImageLoader(url, storage_options=s3.options(), retries=3, retry_backoff=5.0, on_error="skip",
                         **dict(OPTIONS, train=False))
    victim = manifest.shards[1].file
    fs.rm_file(f"{url.removeprefix('s3://')}/{victim}")
    start = time.monotonic()
    samples, _, _ = _epoch(loader)
    assert time.monotonic() - start < 5  # a missing object is not retried (the backoff would be 5 s)
    lost = int(np.sum(loader.table.shard == 1))
    assert len(samples) == len(loader.table) - lost
    assert len(loader.stats.errors) == lost
    assert all(victim in e["shard"] and "FileNotFoundError" in e["reason"] for e in loader.stats.errors)
    loader.close()
    with pytest.raises(ShardError, match=f"{victim}: missing"):  # opened after the loss: named at once
        ImageLoader(url, storage_options=s3.options(), **OPTIONS)


def test_credentials_missing_is_one_clear_error(s3, s3_images):
    options = s3.options(key=None, secret=None)
    with pytest.raises(ManifestError) as error:
        ImageLoader(s3_images, storage_options=options, **OPTIONS)
    message = str(error.value)
    assert "NoCredentialsError" in message and s3_images in message and "\n" not in message
    options = s3.options(key=None, secret="s3cr3t-never-shown")
    with pytest.raises(ManifestError) as error:
        ImageLoader(s3_images, storage_options=options, **OPTIONS)
    assert "s3cr3t" not in str(error.value)


def test_redact_removes_credentials_from_urls():
    assert redact("https://user:pa55@host/x?X-Amz-Signature=abc&part=2") == "https://***@host/x?X-Amz-Signature=***&part=2"
    assert redact("s3://bucket/key") == "s3://bucket/key"


def test_remote_options_are_checked():
    from dataio.formats.errors import ConfigError
    from dataio.images.config import ImageLoaderConfig

    for bad in ({"retries": -1}, {"cache_limit": 0}, {"retry_backoff": -1.0}, {"storage_options": "key=1"},
                {"readahead_batches": 0}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            ImageLoaderConfig(**bad)
