"""A dataio loader given a DistributedSampler yields, on each rank, the batches torch's DataLoader gives with it.

The sampler's ``drop_last`` trims the tail that does not divide among the
ranks (else it is padded by repetition), the loader's ``drop_last`` drops each
rank's short last batch; the imagenet example's validation (sampler
``drop_last=True``, then the remainder evaluated apart) counts every sample once.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from torch.utils.data import DataLoader, DistributedSampler

import dataio
from dataio import ImageLoader
from tests.conftest import NUM_COLOURED


def torch_batches(num_samples: int, world_size: int, rank: int, *, shuffle: bool, sampler_drop: bool,
                  loader_drop: bool, batch_size: int) -> list[list[int]]:
    sampler = DistributedSampler(range(num_samples), world_size, rank, shuffle=shuffle, drop_last=sampler_drop)
    return [b.tolist() for b in DataLoader(range(num_samples), batch_size, sampler=sampler, drop_last=loader_drop)]


def dataio_ranks(shards, num_samples: int, world_size: int, *, shuffle: bool, sampler_drop: bool, loader_drop: bool,
                 batch_size: int, **options) -> list[ImageLoader]:
    return [dataio.DataLoader(shards, batch_size, sampler=DistributedSampler(range(num_samples), world_size, rank,
                                                                             shuffle=shuffle, drop_last=sampler_drop),
                              drop_last=loader_drop, num_workers=1, train=False, **options)
            for rank in range(world_size)]


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 5])
def test_unshuffled_ranks_read_torchs_samples_in_torchs_batches(coloured_shards, world_size):
    for sampler_drop, loader_drop in itertools.product([False, True], [False, True]):
        options = dict(shuffle=False, sampler_drop=sampler_drop, loader_drop=loader_drop, batch_size=4)
        loaders = dataio_ranks(coloured_shards, NUM_COLOURED, world_size, image_size=16, **options)
        for rank, loader in enumerate(loaders):
            theirs = torch_batches(NUM_COLOURED, world_size, rank, **options)
            assert list(loader.batch_sampler) == theirs and len(loader) == len(theirs), (rank, options)
            read = [(batch.samples.tolist(), len(batch.images)) for batch in loader.batches()]
            assert [ids for ids, _ in read] == theirs, (rank, options)  # what the loader yields, images included
            assert [n for _, n in read] == [len(b) for b in theirs]
            sampler = DistributedSampler(range(NUM_COLOURED), world_size, rank, shuffle=False, drop_last=sampler_drop)
            assert list(loader.sampler) == list(sampler) and len(loader.sampler) == len(sampler)
            loader.close()


@pytest.mark.parametrize("world_size", [2, 3])
def test_shuffled_ranks_read_torchs_counts_in_dataios_order(coloured_shards, world_size):
    for sampler_drop, loader_drop in itertools.product([False, True], [False, True]):
        options = dict(shuffle=True, sampler_drop=sampler_drop, loader_drop=loader_drop, batch_size=4)
        loaders = dataio_ranks(coloured_shards, NUM_COLOURED, world_size, image_size=16, **options)
        ours = [[batch.samples.tolist() for batch in loader.batches()] for loader in loaders]
        theirs = [torch_batches(NUM_COLOURED, world_size, r, **options) for r in range(world_size)]
        assert [[len(b) for b in batches] for batches in ours] == [[len(b) for b in batches] for batches in theirs]
        mine = Counter(s for batches in ours for b in batches for s in b)
        torchs = Counter(s for batches in theirs for b in batches for s in b)
        assert (len(mine), sum(mine.values())) == (len(torchs), sum(torchs.values())), options
        for loader in loaders:
            loader.close()


def test_imagenet_example_validation_counts_every_photo_once(real_photo_shards):
    """pytorch/examples imagenet/main.py: ``DistributedSampler(val, shuffle=False, drop_last=True)``, then
    ``Subset(val_loader.dataset, range(len(val_loader.sampler) * world_size, len(val_loader.dataset)))``."""
    world_size, total = 3, len(ImageLoader(real_photo_shards).dataset)
    assert total % world_size  # 14 photos: the tail does not divide
    loaders = dataio_ranks(real_photo_shards, total, world_size, shuffle=False, sampler_drop=True, loader_drop=False,
                           batch_size=3, image_size=64)
    seen = []
    for rank, loader in enumerate(loaders):
        batches = list(loader.batches())
        theirs = torch_batches(total, world_size, rank, shuffle=False, sampler_drop=True, loader_drop=False,
                               batch_size=3)
        assert [b.samples.tolist() for b in batches] == theirs and [len(b) for b in theirs] == [3, 1]
        assert all(b.images.shape[1:] == (3, 64, 64) and not b.repeated.any() for b in batches)
        seen += [s for b in batches for s in b.samples.tolist()]
        loader.close()
    remainder = range(len(loaders[0].sampler) * world_size, len(loaders[0].dataset))
    assert len(remainder) == total % world_size  # the example takes its remainder path with these
    assert sorted(seen + list(remainder)) == list(range(total))  # every photo once


def test_drop_last_without_a_sampler_drops_the_short_batch(coloured_shards):
    """One process: as torch; several ranks (world_size=/rank=): every rank full batches of distinct samples."""
    single = ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=1, train=False, drop_last=True)
    assert [b.samples.tolist() for b in single.batches()] == [b.tolist() for b in DataLoader(
        range(NUM_COLOURED), batch_size=4, drop_last=True)]
    ranks = [ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=1, drop_last=True, world_size=3,
                         rank=r) for r in range(3)]
    read = [[b.samples.tolist() for b in loader.batches()] for loader in ranks]
    assert [[len(b) for b in batches] for batches in read] == [[4, 4, 4]] * 3
    ids = [s for batches in read for b in batches for s in b]
    assert len(ids) == len(set(ids)) == 36 and len(ranks[0]) == 3
    for loader in [single, *ranks]:
        loader.close()
