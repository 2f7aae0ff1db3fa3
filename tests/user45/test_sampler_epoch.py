"""Found while checking issue 45's torchrun batches (not about tiers): a second pass over one `dataio.DataLoader`
after the same `sampler.set_epoch(0)` does not read what torch's DataLoader over that sampler reads. docs/
dataloader.md promises "exactly the indices the sampler yields on this rank, in its order, after
sampler.set_epoch(epoch): as torch's DataLoader over it". The loader follows the sampler's epoch only when it moved
since the last one it followed (`_follow_sampler_epoch`), and its own epoch advanced after the first pass: the
second pass read epoch 1's order, the third epoch 0's again. Now every pass reads the sampler's epoch; a loaded state
keeps its own while the sampler is not moved after the load."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data.distributed import DistributedSampler

import dataio
from tests.sampler_loops import labels_of, loader_over, sampler_labels


def test_each_pass_after_set_epoch_0_reads_what_torchs_dataloader_reads(coloured_shards):
    dataset = dataio.ShardDataset(coloured_shards)
    sampler = DistributedSampler(dataset, num_replicas=2, rank=0, shuffle=True, seed=0)
    loader = dataio.DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=1, normalize=False)
    sampler.set_epoch(0)
    expected = [dataset.targets[i] for i in sampler]  # torch's DataLoader reads list(sampler)
    passes = []
    for _ in range(3):
        sampler.set_epoch(0)
        passes.append(torch.cat([labels for _, labels in loader]).tolist())
    loader.close()
    assert passes == [expected] * 3


_loader, _labels, _sampler_labels = loader_over, labels_of, sampler_labels


def test_without_set_epoch_every_pass_reads_the_samplers_epoch_as_torch_does(coloured_shards):
    sampler = DistributedSampler(range(len(dataio.ShardDataset(coloured_shards))), num_replicas=2, rank=1, seed=3)
    dataset, loader = _loader(coloured_shards, sampler)
    expected = _sampler_labels(dataset, sampler, 0)
    assert [_labels(loader) for _ in range(3)] == [expected] * 3
    assert _labels(loader) != _sampler_labels(dataset, sampler, 1)  # the epochs' orders differ: the test can fail


def test_loader_set_epoch_moves_the_given_sampler_too(coloured_shards):
    sampler = DistributedSampler(range(len(dataio.ShardDataset(coloured_shards))), num_replicas=2, rank=0, seed=0)
    dataset, loader = _loader(coloured_shards, sampler)
    expected = _sampler_labels(dataset, sampler, 2)
    sampler.set_epoch(0)
    loader.set_epoch(2)
    assert sampler.epoch == 2
    assert _labels(loader) == expected


def test_a_loaded_state_keeps_its_epoch_until_the_sampler_is_moved(coloured_shards):
    sampler = DistributedSampler(range(len(dataio.ShardDataset(coloured_shards))), num_replicas=2, rank=0, seed=0)
    dataset, loader = _loader(coloured_shards, sampler)
    loader.set_epoch(1)
    batches = iter(loader)
    first = next(batches)[1].tolist()
    state = loader.state_dict()
    rest = torch.cat([labels for _, labels in batches]).tolist()
    assert first + rest == _sampler_labels(dataset, sampler, 1)

    fresh = DistributedSampler(range(len(dataset)), num_replicas=2, rank=0, seed=0)  # a new process: epoch 0
    _, resumed = _loader(coloured_shards, fresh)
    resumed.load_state_dict(state)
    assert _labels(resumed) == rest  # not moved after the load: the saved epoch's rest

    again = DistributedSampler(range(len(dataset)), num_replicas=2, rank=0, seed=0)
    _, moved = _loader(coloured_shards, again)
    moved.load_state_dict(state)
    again.set_epoch(1)  # the loop's set_epoch of the saved epoch keeps the position
    assert _labels(moved) == rest
    again.set_epoch(3)  # a new epoch set on the sampler: read from its start
    assert _labels(moved) == _sampler_labels(dataset, again, 3)


def test_a_numpy_epoch_on_the_sampler_is_put_back_after_a_len_before_a_resumed_pass(coloured_shards):
    """A resumed loader reads its saved epoch for a ``len()`` and must leave the user's sampler where it was, a numpy
    integer epoch too (``given_order.sampler_indices`` put back only a Python int)."""
    import numpy as np  # lazy: only here

    sampler = DistributedSampler(range(len(dataio.ShardDataset(coloured_shards))), num_replicas=2, rank=0, seed=0)
    _, loader = _loader(coloured_shards, sampler)
    loader.set_epoch(1)
    batches = iter(loader)
    next(batches)
    state = loader.state_dict()
    batches.close()
    fresh = DistributedSampler(range(len(dataio.ShardDataset(coloured_shards))), num_replicas=2, rank=0, seed=0)
    fresh.set_epoch(np.int64(0))
    _, resumed = _loader(coloured_shards, fresh)
    resumed.load_state_dict(state)
    len(resumed)
    assert fresh.epoch == 0 and isinstance(fresh.epoch, np.int64)
    loader.close(), resumed.close()
