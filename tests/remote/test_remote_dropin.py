"""URLs work wherever a path does: dataio.DataLoader and TextLoader on the S3 endpoint, and a quiet exit there."""

from __future__ import annotations

import pytest
import torch

import dataio
from dataio.formats.errors import DataioError
from tests.loader.test_quiet_exit import check_quiet_exit


def _pairs(loader) -> list:
    with loader:
        return [(images.clone(), labels.clone()) for images, labels in loader]


def test_dropin_reads_a_url_as_it_reads_the_folder(s3, real_photo_shards, text_shards):
    images_url, text_url = s3.upload(real_photo_shards), s3.upload(text_shards)
    options = dict(batch_size=4, shuffle=True, image_size=64, num_workers=2)
    local = _pairs(dataio.DataLoader(real_photo_shards, **options))
    remote_loader = dataio.DataLoader(images_url, storage_options=s3.options(), **options)
    assert isinstance(remote_loader, dataio.ImageLoader) and remote_loader.config.train
    remote = _pairs(remote_loader)
    assert len(remote) == len(local) == 4
    for (a, la), (b, lb) in zip(remote, local, strict=True):
        assert a.dtype == torch.float32 and torch.equal(a, b) and torch.equal(la, lb)
    with dataio.DataLoader(text_shards, batch_size=8) as text_local, \
            dataio.DataLoader(text_url, batch_size=8, storage_options=s3.options()) as text_remote:
        assert isinstance(text_remote, dataio.TextLoader)
        pairs = list(zip(text_remote, text_local, strict=True))
        assert len(pairs) == len(text_local) > 1
        assert all(torch.equal(a["input_ids"], b["input_ids"]) for a, b in pairs)
    with pytest.raises(DataioError, match="s3://no-such-bucket/out/manifest.json") as info:
        dataio.DataLoader("s3://no-such-bucket/out", storage_options=s3.options(),
                          retries=0)
    assert "\n" not in str(info.value) and "s3:/no-such" not in str(info.value)


def test_nothing_printed_at_exit_with_remote_shards(s3, real_photo_shards, text_shards):
    check_quiet_exit(s3.upload(real_photo_shards), s3.upload(text_shards), s3.options())
