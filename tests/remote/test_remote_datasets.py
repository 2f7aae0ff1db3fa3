"""ShardDataset and TokenDataset over S3 (moto on loopback): the local samples, in worker processes too."""

from __future__ import annotations

import pickle

import torch
from torch.utils.data import DistributedSampler

import dataio
from dataio import ImageLoader, ShardDataset, TokenDataset
from tests.remote.conftest import SECRET


def test_shard_dataset_on_s3_reads_the_local_samples_in_workers_and_in_the_loader(s3, real_photo_shards):
    url = s3.upload(real_photo_shards)
    local = ShardDataset(real_photo_shards, image_size=40)
    remote = ShardDataset(url, image_size=40, storage_options=s3.options())
    assert len(remote) == len(local) and remote.targets == local.targets and remote.classes == local.classes
    assert torch.equal(ShardDataset(url, storage_options=s3.options())[13][0], ShardDataset(real_photo_shards)[13][0])
    assert SECRET not in repr(remote) and len(pickle.dumps(remote)) < 4096
    remote[0]  # opened here first: each forked worker opens its own filesystem and ranges
    loader = torch.utils.data.DataLoader(remote, batch_size=5, num_workers=2, multiprocessing_context="fork")
    images = torch.cat([batch for batch, _ in loader])
    assert all(torch.equal(images[i], local[i][0]) for i in range(len(local)))
    # DistributedSampler(dataset) with dataio's loader: the storage options travel with the data set
    sampler = DistributedSampler(remote, num_replicas=2, rank=1, shuffle=False)
    fast = dataio.DataLoader(remote, batch_size=4, sampler=sampler, train=False, num_workers=2, normalize=False)
    assert isinstance(fast, ImageLoader) and fast.location.remote
    assert fast.config.storage_options is remote.config.storage_options
    for batch in fast.batches():
        for image, sample in zip(batch.images, batch.samples.tolist(), strict=True):
            assert torch.equal(image, local[sample][0])
    fast.close()


def test_token_dataset_on_s3_is_a_local_copy(s3, text_shards):
    url = s3.upload(text_shards)
    remote = TokenDataset(url, storage_options=s3.options())
    local = TokenDataset(text_shards)
    assert len(remote) == len(local) and all(torch.equal(remote[i], local[i]) for i in (0, 7, len(local) - 1))
    assert SECRET.encode() not in pickle.dumps(remote)  # the workers read the copy: no credentials travel
