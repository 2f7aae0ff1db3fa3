"""dataio.DataLoader takes train or eval transforms from the effective shuffle (unless train= is given), logs the
choice, and yields float32 normalised batches unless normalize=False."""

from __future__ import annotations

import logging

import pytest
from torch.utils.data import DistributedSampler, RandomSampler, SequentialSampler

import dataio
from dataio.images.config import ImageLoaderConfig

N = 14  # real_photo_shards


@pytest.mark.parametrize("options, train", [
    ({}, False),
    ({"shuffle": False}, False),
    ({"shuffle": True}, True),
    ({"shuffle": False, "sampler": DistributedSampler(range(N), num_replicas=1, rank=0, shuffle=True)}, True),
    ({"sampler": DistributedSampler(range(N), num_replicas=1, rank=0, shuffle=False)}, False),
    ({"sampler": RandomSampler(range(N))}, True),
    ({"sampler": SequentialSampler(range(N))}, False),
    ({"shuffle": False, "train": True}, True),
    ({"shuffle": True, "train": False}, False),
])
def test_train_follows_the_effective_shuffle_unless_given(real_photo_shards, caplog, options, train):
    with caplog.at_level(logging.INFO, logger="dataio"):
        loader = dataio.DataLoader(real_photo_shards, batch_size=4, **options)
    assert loader.config.train is train and loader.config.normalize
    records = [r for r in caplog.records if r.name == "dataio" and r.levelno == logging.INFO
               and r.getMessage().startswith("dataio.DataLoader(")]  # the loader's own line follows
    assert len(records) == 1
    message = records[0].getMessage()
    assert message.startswith(f"dataio.DataLoader({real_photo_shards}): ")
    assert ("training transforms" if train else "evaluation transforms") in message
    assert ("as train= says" in message) == ("train" in options)
    loader.close()


def test_normalize_false_and_an_explicit_config_are_kept(real_photo_shards):
    with dataio.DataLoader(real_photo_shards, normalize=False) as loader:
        assert not loader.config.normalize and not loader.config.train
    config = ImageLoaderConfig(train=True, normalize=False, image_size=32)
    with dataio.DataLoader(real_photo_shards, config=config) as loader:
        assert loader.config.train and not loader.config.normalize and loader.config.image_size == 32
