"""device=, transform= and batch_transform= are checked when a loader config is built: one line naming them."""

from __future__ import annotations

import pytest
import torch

import dataio
from dataio.formats.errors import ConfigError
from dataio.images.config import ImageLoaderConfig
from dataio.text.config import TextLoaderConfig

CONFIGS = (ImageLoaderConfig, TextLoaderConfig)


def refused(build, parameter: str, **options) -> str:
    with pytest.raises(ConfigError) as info:
        build(**options)
    message = str(info.value)
    assert info.value.parameters[0] == parameter and message.startswith(parameter) and "\n" not in message
    return message


@pytest.mark.parametrize("config", CONFIGS)
def test_cuda_without_cuda_is_one_line_naming_device(config, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for device in ("cuda", "cuda:3", torch.device("cuda")):
        assert "CUDA is not available on this machine" in refused(config, "device", device=device)


@pytest.mark.parametrize("config", CONFIGS)
def test_a_cuda_index_past_the_count_is_named(config, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert "has 2 CUDA device(s), cuda:0 to cuda:1" in refused(config, "device", device="cuda:3")
    assert config(device="cuda:1").device == "cuda:1"


@pytest.mark.parametrize("config", CONFIGS)
def test_unknown_devices_are_named(config):
    assert "'gpu' is not a device" in refused(config, "device", device="gpu")
    assert "'meta' is not supported" in refused(config, "device", device="meta")
    assert "got int" in refused(config, "device", device=0)
    assert config(device=torch.device("cpu")).device == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_the_loaders_refuse_cuda_here(real_photo_shards, text_shards):
    refused(dataio.ImageLoader, "device", source=real_photo_shards, device="cuda")
    refused(dataio.DataLoader, "device", dataset=real_photo_shards, device="cuda:0")
    refused(dataio.TextLoader, "device", source=text_shards, device="cuda")


def test_hooks_are_checked():
    assert "must be a callable, got int" in refused(ImageLoaderConfig, "transform", transform=3)
    refused(ImageLoaderConfig, "batch_transform", batch_transform="x")
    refused(TextLoaderConfig, "batch_transform", batch_transform=3)
    assert "use batch_transform=" in refused(ImageLoaderConfig, "transform", transform=abs, crop_on_device=True)
    assert "decoder='turbo'" in refused(ImageLoaderConfig, "transform", transform=abs, decoder="dali")


def test_auto_decoder_keeps_turbo_for_a_transform(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert ImageLoaderConfig(device="cuda").resolved_decoder == "dali"
    assert ImageLoaderConfig(device="cuda", transform=abs).resolved_decoder == "turbo"


def test_a_non_square_image_size_is_one_line_where_crops_are_square(real_photo_shards):
    """(H, W) is the box loader's (tests/detection/test_detection_rectangular.py); the classification loader, the
    drop-in and ShardDataset over a class folder refuse it in one line, as do the square-window decode paths."""
    assert ImageLoaderConfig(image_size=(64, 96)).output_shape == (64, 96)
    assert ImageLoaderConfig(image_size=[64, 64]).image_size == 64
    assert "crop_on_device crops square windows" in refused(ImageLoaderConfig, "image_size", image_size=(64, 96),
                                                            crop_on_device=True)
    refused(ImageLoaderConfig, "decode_size", crop_on_device=True, decode_size=[96, 128])
    for build in (dataio.ImageLoader, dataio.DataLoader, dataio.ShardDataset):
        message = refused(build, "image_size", **{"dataset" if build is dataio.DataLoader else "source":
                                                  real_photo_shards}, image_size=(64, 96))
        assert message.endswith("is for box folders (DetectionLoader): the crops of images with classes are "
                                "square; pass one int") or message.endswith("is square; pass one int")
