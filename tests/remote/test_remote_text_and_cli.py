"""TextLoader, ``dataio verify``, ``dataio convert`` and ``dataio train`` options against the S3 endpoint."""

from __future__ import annotations

import numpy as np
import pytest

from dataio import ImageLoader, TextLoader
from dataio.cli import _storage_options, main
from dataio.formats.errors import UsageError
from dataio.formats.dataset.manifest import MANIFEST_NAME, read_manifest
from dataio.formats.dataset.remote_output import upload_dataset
from dataio.formats.remote.storage import Location, RetryPolicy, open_location
from dataio.formats.text.synthetic_text import synthetic_documents
from dataio.formats.text.tokenizer_setup import TokenizerConfig
from dataio.train.config import TrainConfig
from tests.remote.conftest import KEY, SECRET
from tests.text_fixtures import convert


def _batches(loader: TextLoader) -> list[dict[str, np.ndarray]]:
    return [{k: v.numpy().copy() for k, v in batch.items()} for batch in loader]


def test_text_loader_from_s3_gives_the_local_batches(s3, text_shards, tmp_path):
    url = s3.upload(text_shards)
    options = dict(mode="budget", max_tokens=512, seed=3)
    with TextLoader(text_shards, **options) as local:
        expected = _batches(local)
    for cache in (None, tmp_path / "cache"):
        with TextLoader(url, storage_options=s3.options(), cache_dir=cache, **options) as remote:
            got = _batches(remote)
        assert len(got) == len(expected)
        for a, b in zip(got, expected, strict=True):
            assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    copies = list((tmp_path / "cache").iterdir())
    assert len(copies) == 1 and (copies[0] / MANIFEST_NAME).is_file()  # kept for the next run


def test_a_mixture_of_a_local_and_an_s3_source_reads_as_two_local_ones(s3, text_shards, tmp_path):
    code = tmp_path / "code.txt"
    code.write_text("\n".join(synthetic_documents(80, seed=7, mean_words=15)) + "\n")
    local_code = convert([code], tmp_path / "code", tokenizer=TokenizerConfig(path=text_shards / "tokenizer.json"))
    url = s3.upload(local_code)
    schedule = [(0, {"web": 0.7, "code": 0.3}), (40, {"web": 0.2, "code": 0.8})]
    options = dict(mode="fixed", batch_size=8, weights=schedule, epoch_until="code", seed=2)
    with TextLoader({"web": text_shards, "code": local_code}, **options) as local:
        expected = _batches(local)
        counts = dict(local.stats.sources)
    with TextLoader({"web": text_shards, "code": url}, storage_options=s3.options(), **options) as mixed:
        got = _batches(mixed)
        assert dict(mixed.stats.sources) == counts and mixed.mixture_passes()["code"] == 1
    assert len(got) == len(expected) > 10
    for a, b in zip(got, expected, strict=True):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert counts["code"]["samples"] == len(TextLoader(local_code).shards)  # the epoch ended with code's pass


def test_verify_cli_on_s3_with_the_usual_environment(s3, image_shards, monkeypatch, capsys):
    url = s3.upload(image_shards)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    assert main(["verify", url, "--storage-option", "skip_instance_cache=true"]) == 0
    out = capsys.readouterr()
    assert url in out.out and "OK" in out.out
    _, manifest = read_manifest(image_shards)
    s3.fs().rm_file(f"{url.removeprefix('s3://')}/{manifest.shards[0].file}")
    assert main(["verify", url, "--storage-option", "skip_instance_cache=true"]) == 1
    err = capsys.readouterr().err
    assert f"{url}/{manifest.shards[0].file}" in err and "missing" in err and SECRET not in err


def test_convert_to_s3_uploads_the_manifest_last_and_resumes(s3, image_folder, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    s3.fs().mkdir("converted")
    url, staging = "s3://converted/imagenet", tmp_path / "staging"
    argv = ["convert", "images", str(image_folder[0]), url, "--staging", str(staging), "--shard-size", "400KB",
            "--workers", "1", "--no-progress", "--storage-option", "skip_instance_cache=true"]
    assert main(argv) == 0
    capsys.readouterr()
    with ImageLoader(staging, batch_size=8, image_size=32, train=False) as local, \
            ImageLoader(url, storage_options=s3.options(), batch_size=8, image_size=32, train=False) as remote:
        assert [b.labels.tolist() for b in remote.batches()] == [b.labels.tolist() for b in local.batches()]
    # an upload killed before its end: the last shard and the manifest never arrived
    _, manifest = read_manifest(staging)
    fs = s3.fs()
    fs.rm_file(f"converted/imagenet/{manifest.shards[-1].file}")
    fs.rm_file(f"converted/imagenet/{MANIFEST_NAME}")
    assert main(argv) == 0
    assert "uploaded 2 missing file(s)" in capsys.readouterr().out  # resumed: the rest was not sent again
    with ImageLoader(url, storage_options=s3.options(), batch_size=8, image_size=32, train=False) as remote:
        assert sum(len(b.labels) for b in remote.batches()) == manifest.num_samples


def test_upload_order_puts_the_manifest_last(s3, image_shards):
    real = open_location("s3://order-test/out", s3.options())
    real.fs.mkdir("order-test")
    sent = []

    class Recording:
        def __getattr__(self, name):
            return getattr(real.fs, name)

        def put_file(self, local, remote):
            sent.append(remote.rsplit("/", 1)[-1])
            real.fs.put_file(local, remote)

    upload_dataset(image_shards, Location(real.root, Recording(), real.url), RetryPolicy(attempts=1))
    assert sent[-1] == MANIFEST_NAME and len(sent) == len(set(sent)) > 2


def test_storage_option_flags_and_train_urls(image_folder, tmp_path, capsys):
    assert _storage_options(["anon=true", "client_kwargs.endpoint_url=http://127.0.0.1:9", "x=abc"]) == {
        "anon": True, "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}, "x": "abc"}
    with pytest.raises(UsageError) as error:
        _storage_options(["secret"])
    assert "KEY=VALUE" in str(error.value)
    config = TrainConfig(train="s3://bucket/train", val="https://host/val", storage_options={"anon": True})
    assert config.train == "s3://bucket/train" and config.val == "https://host/val"
    assert main(["convert", "images", str(image_folder[0]), str(tmp_path / "out"), "--storage-option", "a=1"]) == 2
    assert "are for a remote OUT" in capsys.readouterr().err  # a local OUT takes no storage options
