"""An image mixture of a local folder, an S3 bucket (moto on loopback) and an HTTP server: the batches of the
same mixture read from local folders, by range requests to the remote sources only."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dataio import ImageLoader

OPTIONS = dict(batch_size=8, image_size=32, seed=5, num_workers=2, epoch_length=60)
WEIGHTS = {"local": 0.5, "s3": 0.3, "http": 0.2}


def _epoch(loader: ImageLoader) -> tuple[list[int], torch.Tensor, list[int]]:
    batches = list(loader.batches())
    samples = np.concatenate([b.samples for b in batches]).tolist()
    return samples, torch.cat([b.images for b in batches]), torch.cat([b.labels for b in batches]).tolist()


@pytest.mark.parametrize("world_size, rank", [(1, 0), (2, 1)])
def test_local_and_remote_sources_mix_as_local_ones(s3, s3_images, http_root, image_shards, coloured_shards,
                                                    world_size, rank):
    local = {"local": coloured_shards, "s3": image_shards, "http": image_shards}
    with ImageLoader(local, weights=WEIGHTS, world_size=world_size, rank=rank, **OPTIONS) as reference:
        expected = _epoch(reference)
        classes = reference.classes
    remote = {"local": coloured_shards, "s3": s3_images, "http": http_root}
    options = {"s3": s3.options()}  # per source: the HTTP server takes none of S3's
    with ImageLoader(remote, weights=WEIGHTS, storage_options=options, world_size=world_size, rank=rank,
                     **OPTIONS) as mixed:
        assert mixed.files.remote
        got = _epoch(mixed)
        assert mixed.classes == classes
        source = mixed.mixture.source_of(np.array(got[0]))
        remote_parts = mixed.files.parts[1:]
        assert sum(part.requests for part in remote_parts) == int((source > 0).sum())  # one range per remote sample
        counts = mixed.stats.as_dict()["sources"]
    assert got[0] == expected[0] and got[2] == expected[2]
    assert torch.equal(got[1], expected[1])
    assert sorted(counts) == ["http", "local", "s3"] and sum(c["samples"] for c in counts.values()) == len(got[0])


def test_shared_storage_options_go_to_the_remote_sources_only(s3, s3_images, image_shards, coloured_shards):
    weights = {"local": 0.6, "s3": 0.4}
    with ImageLoader({"local": coloured_shards, "s3": image_shards}, weights=weights, **OPTIONS) as reference:
        expected = _epoch(reference)
    with ImageLoader({"local": coloured_shards, "s3": s3_images}, weights=weights, storage_options=s3.options(),
                     **OPTIONS) as mixed:
        got = _epoch(mixed)
    assert got[0] == expected[0] and got[2] == expected[2] and torch.equal(got[1], expected[1])
