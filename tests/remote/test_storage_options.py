"""Storage options (issues 32 and 33): no value is ever printed, options go per URL (an S3 training set with an
HTTP validation set in one run), and an option the backend does not take is one line at open. The command line
is run as a user runs it: a subprocess, its exit code and stderr checked."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import dataio
from dataio import ImageLoader, ImageLoaderConfig, ShardDataset, ShardDatasetConfig, TextLoader, TextLoaderConfig
from dataio import TokenDataset, TokenDatasetConfig
from dataio.formats.dataset.manifest import ManifestError
from dataio.formats.errors import ConfigError, UsageError
from dataio.formats.remote.storage_options import StorageOptions
from dataio.cli.storage_flag import storage_options_of
from dataio.train.config import TrainConfig
from dataio.train.set_options import train_options, val_options
from tests.remote.conftest import KEY

ROOT = Path(__file__).resolve().parents[2]
SECRET = "AKIA-SECRET-123"  # moto takes any secret: as far as a run goes, this one is real
LOADER = dict(batch_size=4, image_size=32, train=False, num_workers=1)


def _env(**aws: str) -> dict[str, str]:
    """This environment without any AWS variable (credentials come from the flags alone), plus ``aws``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, "AWS_EC2_METADATA_DISABLED": "true", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
            "AWS_CONFIG_FILE": "/nonexistent", "AWS_DEFAULT_REGION": "us-east-1", "PYTHONPATH": str(ROOT), **aws}


def _dataio(*argv: str, cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dataio", *argv], cwd=cwd, env=env or _env(), capture_output=True,
                          text=True, timeout=timeout)


def _shown(*texts: object) -> str:
    return "\n".join(str(t) for t in texts)


# -- 1. no value is ever printed -----------------------------------------------------------------------------------

def test_every_config_prints_the_keys_of_its_storage_options_never_a_value():
    options = {"key": KEY, "secret": SECRET, "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"},
               "s3://user:pa55word@bucket": {"token": SECRET}}
    configs = [ImageLoaderConfig(storage_options=options), TextLoaderConfig(storage_options=options),
               ShardDatasetConfig(storage_options=options), TokenDatasetConfig(storage_options=options),
               TrainConfig(train="s3://bucket/train", val="https://host/val", storage_options=options)]
    for config in configs:
        held = config.storage_options
        shown = _shown(repr(config), str(config), f"{config}", repr(held), held, held["client_kwargs"],
                       json.dumps(dataclasses.asdict(config), default=str))
        assert SECRET not in shown and KEY not in shown and "pa55word" not in shown, type(config).__name__
        assert "127.0.0.1" not in shown  # no value at all, not only the credentials
        assert "'secret': '***'" in repr(config) and "'client_kwargs': {'endpoint_url': '***'}" in repr(config)
        assert held == options and held.to_dict() == options  # the backend still gets every value
        assert pickle.loads(pickle.dumps(config)).storage_options == options
    with pytest.raises(ConfigError, match="storage_options"):
        ImageLoaderConfig(storage_options="key=1")


def test_loaders_and_data_sets_over_s3_print_and_log_no_value(s3, s3_images, text_shards, caplog):
    caplog.set_level(logging.INFO, logger="dataio")
    options = s3.options(secret=SECRET)
    text_url = s3.upload(text_shards)
    with ImageLoader(s3_images, storage_options=options, **LOADER) as loader, \
            TextLoader(text_url, storage_options=options, batch_size=4, mode="fixed") as text:
        shards = ShardDataset(s3_images, storage_options=options)
        tokens = TokenDataset(text_url, storage_options=options)
        shown = _shown(repr(loader.config), repr(loader.dataset), repr(text.config), repr(shards), repr(tokens),
                       *(record.getMessage() for record in caplog.records))
        assert SECRET not in shown and "'secret': '***'" in repr(loader.dataset)
        first = shards[0][0]
    copy = pickle.loads(pickle.dumps(shards))  # as torch's workers receive it: the options travel, and work
    assert torch.equal(copy[0][0], first) and SECRET not in repr(copy)


def test_a_backend_that_echoes_an_option_value_is_shown_without_it(s3, s3_images, tmp_path):
    """botocore names a bad retry mode in its message: the error is one line naming the URL, the value gone."""
    options = s3.options(config_kwargs={"retries": {"mode": SECRET}})
    with pytest.raises(ManifestError) as error:
        ImageLoader(s3_images, storage_options=options, retries=0, **LOADER)
    assert s3_images in str(error.value) and "InvalidRetryModeError" in str(error.value)
    assert SECRET not in str(error.value) and "\n" not in str(error.value)
    done = _dataio("verify", s3_images, "--storage-option", f"config_kwargs.retries.mode={SECRET}",
                   cwd=tmp_path, env=_env(AWS_ENDPOINT_URL=s3.endpoint, AWS_ACCESS_KEY_ID=KEY,
                                          AWS_SECRET_ACCESS_KEY="testing-secret"))
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "InvalidRetryModeError" in done.stderr and SECRET not in done.stderr + done.stdout


# -- 2. options per URL ------------------------------------------------------------------------------------------

def test_options_per_url_prefix_longest_first_merged_over_every_urls():
    options = StorageOptions({"anon": False, "client_kwargs": {"region_name": "eu"},
                              "s3://bucket": {"key": "a", "client_kwargs": {"endpoint_url": "E"}},
                              "s3://bucket/deep/": {"key": "b"}, "https://host:8443": {"headers": {"x": "1"}},
                              "gs://": {"token": "anon"}})
    assert options.for_source("s3://bucket/data") == {"anon": False, "key": "a",
                                                       "client_kwargs": {"region_name": "eu", "endpoint_url": "E"}}
    assert options.for_source("s3://bucket/deep/x")["key"] == "b"  # the longest prefix wins
    assert options.for_source("s3://bucket-2/data") == {"anon": False, "client_kwargs": {"region_name": "eu"}}
    assert options.for_source("https://host:8443/val")["headers"] == {"x": "1"}
    assert options.for_source("gs://any/thing")["token"] == "anon"
    named = StorageOptions({"anon": True, "web": {"key": "w"}, "s3://b": {"secret": "s"}})
    assert named.for_source("s3://b/x", "web", ("web", "code")) == {"anon": True, "secret": "s", "key": "w"}
    assert named.for_source("s3://b/x", "code", ("web", "code")) == {"anon": True, "secret": "s"}
    with pytest.raises(ConfigError, match="s3://b"):
        StorageOptions({"s3://b": "key=1"})


def test_the_trainer_gives_each_data_set_its_own_options():
    config = TrainConfig(train={"web": "s3://bucket/web", "code": "code-folder"}, weights={"web": 1, "code": 1},
                         val={"held": "https://host/held", "more": "s3://bucket/more"},
                         storage_options={"s3://bucket": {"key": "k"}, "held": {"headers": {"a": "b"}},
                                          "skip_instance_cache": True})
    assert train_options(config) == {"web": {"key": "k", "skip_instance_cache": True}, "code": None}
    assert val_options(config) == {"held": {"headers": {"a": "b"}, "skip_instance_cache": True},
                                   "more": {"key": "k", "skip_instance_cache": True}}
    one = TrainConfig(train="s3://bucket/t", val="https://host/v",
                      storage_options={"train": {"key": "k"}, "val": {"headers": {"a": "b"}}})
    assert train_options(one) == {"key": "k"} and val_options(one) == {"val": {"headers": {"a": "b"}}}


def test_storage_option_flags_per_url_prefix_and_per_name():
    flags = ["anon=true", "client_kwargs.endpoint_url=http://127.0.0.1:9", "s3://bucket/:key=AKIA:x=y==",
             "https://host:8443:headers.X-Api-Key=abc", "web:key=k"]
    assert storage_options_of(flags) == {
        "anon": True, "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}, "s3://bucket/": {"key": "AKIA:x=y=="},
        "https://host:8443": {"headers": {"X-Api-Key": "abc"}}, "web": {"key": "k"}}
    for bad in ([SECRET], [f"s3://b/:{SECRET}"], ["web=1", "web:key=2"]):
        with pytest.raises(UsageError) as error:
            storage_options_of(bad)
        assert SECRET not in str(error.value)


def test_the_dataloader_swap_gives_a_mixtures_sources_their_own_options(s3, s3_images, http_root):
    """``dataio.DataLoader`` opens each source's manifest with that source's options, as the loaders do."""
    weights = {"s3": 0.5, "http": 0.5}
    for options in ({"s3": s3.options()}, {s3_images.rsplit("/", 1)[0]: s3.options()}):
        with dataio.DataLoader({"s3": s3_images, "http": http_root}, weights=weights, storage_options=options,
                               batch_size=4, image_size=32, num_workers=1) as loader:
            images, labels = next(iter(loader))
            assert images.shape == (4, 3, 32, 32) and SECRET not in repr(loader.config)


def test_train_on_s3_with_an_http_validation_set_writes_no_secret(s3, s3_images, http_root, tmp_path):
    """Each URL its own options from the command line; nothing the run writes or prints holds the secret."""
    bucket = s3_images.rsplit("/", 1)[0] + "/"
    out = tmp_path / "run"
    flags = [f"{bucket}:key={KEY}", f"{bucket}:secret={SECRET}", f"{bucket}:client_kwargs.endpoint_url={s3.endpoint}",
             f"{bucket}:skip_instance_cache=true"]
    done = _dataio("train", "--train", s3_images, "--val", http_root, "--out", str(out), "--model", "small_cnn",
                   "--epochs", "1", "--image-size", "32", "--batch-size", "8", "--device", "cpu", "--workers", "1",
                   "--tensorboard", *(x for flag in flags for x in ("--storage-option", flag)), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    log = json.loads((out / "log.json").read_text())
    assert "val_acc" in log["epochs"][-1]  # the HTTP set was read, with none of S3's options
    written = [path for path in out.rglob("*") if path.is_file()]
    assert {"log.json", "log.csv", "checkpoint.pt"} <= {path.name for path in written}
    assert any("tfevents" in path.name for path in written)
    leaked = [str(path) for path in written if SECRET.encode() in path.read_bytes()]
    assert not leaked and SECRET not in done.stdout + done.stderr


# -- 3. an option the backend does not take ------------------------------------------------------------------------

def test_an_option_the_backend_does_not_take_is_one_line_naming_it(s3, s3_images, http_root):
    cases = [(s3_images, s3.options(foo=1), "foo", "s3"),
             (s3_images, s3.options(client_kwargs={"endpoint_url": s3.endpoint, "bar": 1}), "client_kwargs.bar", "s3"),
             (s3_images, s3.options(config_kwargs={"baz": 1}), "config_kwargs.baz", "s3"),
             (http_root, {"key": SECRET}, "key", "http")]
    for url, options, name, backend in cases:
        for make in (lambda: ImageLoader(url, storage_options=options, **LOADER),
                     lambda: TextLoader(url, storage_options=options)):
            with pytest.raises(ConfigError) as error:
                make()
            message = str(error.value)
            assert f"storage_options {name}: the {backend} backend" in message and url in message, message
            assert "\n" not in message and SECRET not in message


def test_cli_names_the_option_a_backend_refuses_and_exits_2(s3, s3_images, http_root, image_folder, tmp_path):
    """Options for every URL reach the HTTP validation set too: one line naming the one it refuses, before any
    step; a conversion to S3 is refused before it converts anything."""
    done = _dataio("train", "--train", s3_images, "--val", http_root, "--out", str(tmp_path / "run"), "--epochs", "1",
                   "--image-size", "32", "--device", "cpu", "--storage-option", f"key={KEY}",
                   "--storage-option", f"secret={SECRET}", cwd=tmp_path, env=_env(AWS_ENDPOINT_URL=s3.endpoint))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--storage-option key: the http backend" in done.stderr and http_root in done.stderr
    assert SECRET not in done.stderr + done.stdout
    staging = tmp_path / "staging"
    done = _dataio("convert", "images", str(image_folder[0]), "s3://converted/out", "--staging", str(staging),
                   "--workers", "1", "--no-progress", "--storage-option", "client_kwargs.bogus=1", cwd=tmp_path,
                   env=_env(AWS_ENDPOINT_URL=s3.endpoint, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--storage-option client_kwargs.bogus: the s3 backend" in done.stderr
    assert not (staging / "manifest.json").exists()  # refused at open, not after the conversion


@pytest.mark.parametrize("option", ["timeout=" + SECRET, "headers=" + SECRET, "client_kwargs=[1, 2]"])
def test_an_option_of_the_wrong_type_is_one_line_not_a_traceback(http_root, s3, s3_images, tmp_path, option):
    """An option the backend takes, of the wrong type or shape (``timeout`` as text for aiohttp, ``client_kwargs``
    a list, ``config_kwargs.retries`` a string for botocore), failed deep inside the backend: a Python traceback
    naming no option. Now one line naming the options and the backend, never a value, exit 2."""
    key = option.partition("=")[0]
    done = _dataio("verify", http_root, "--storage-option", option, cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr[-2000:]
    assert done.stderr.startswith("dataio verify: error: --storage-option") and key in done.stderr
    assert "Traceback" not in done.stderr and SECRET not in done.stderr
    done = _dataio("verify", s3_images, "--storage-option", f"config_kwargs.retries={SECRET}", cwd=tmp_path,
                   env=_env(AWS_ENDPOINT_URL=s3.endpoint, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY="x" * 12),
                   timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr[-2000:]
    assert "the s3 backend" in done.stderr and "config_kwargs.retries" in done.stderr and SECRET not in done.stderr
    with pytest.raises(ConfigError, match="storage_options: the http backend"):
        ImageLoader(http_root, storage_options={"timeout": SECRET}, **LOADER)


def test_a_remote_file_past_its_limit_is_read_no_further(http_root):
    from dataio.formats.bounded_read import FileTooLarge
    from dataio.formats.remote.storage import open_location

    location = open_location(http_root)
    whole = location.read_bytes("manifest.json")
    assert location.read_bytes("manifest.json", limit=len(whole)) == whole
    with pytest.raises(FileTooLarge, match=f"past {len(whole) - 1:,} bytes"):
        location.read_bytes("manifest.json", limit=len(whole) - 1)
