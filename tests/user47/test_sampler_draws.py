"""user47: a sampler= that draws anew at every pass at the same epoch (Lightning's `DistributedSamplerWrapper` over
a `WeightedRandomSampler`, as Lightning's `use_distributed_sampler` wraps one) read the same draws at each
`set_epoch(0)` pass over a `dataio.DataLoader`: the loader kept the order it read for the epoch. torch's
DataLoader iterates its sampler once a pass, and docs/dataloader.md says each pass reads the sampler "as torch's
DataLoader does". A pass now reads the sampler again when an earlier pass read the cached order; a `len()` before
the pass still draws nothing more, as torch's `len` draws nothing. Each dataio pass is compared with the same pass
of a twin sampler (same weights, same generator seed) read as torch's DataLoader reads it."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import WeightedRandomSampler

import dataio

wrapper = pytest.importorskip("lightning.fabric.utilities.distributed").DistributedSamplerWrapper


def _weighted(size: int) -> WeightedRandomSampler:
    return WeightedRandomSampler([1.0] * size, size, generator=torch.Generator().manual_seed(11))


def _labels(loader) -> list[int]:
    return torch.cat([labels for _, labels in loader]).tolist()


@pytest.mark.parametrize("wrapped", [True, False], ids=["lightning_wrapper", "plain_weighted"])
def test_each_pass_draws_as_torchs_dataloader_draws(coloured_shards, wrapped):
    dataset = dataio.ShardDataset(coloured_shards)
    size = len(dataset)
    make = (lambda: wrapper(_weighted(size), num_replicas=2, rank=1, seed=0)) if wrapped else (lambda: _weighted(size))
    sampler, twin = make(), make()
    loader = dataio.DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=0, normalize=False)
    passes, wants = [], []
    for _ in range(3):
        for s in (sampler, twin):
            if wrapped:
                s.set_epoch(0)  # an evaluation loop's set_epoch(0), or a loop that never moves it
        wants.append([dataset.targets[i] for i in twin])  # torch's DataLoader: one iteration a pass
        len(loader)  # torch's len draws nothing
        passes.append(_labels(loader))
    loader.close()
    assert passes == wants
    assert wants[0] != wants[1]  # the draws differ pass to pass: the test can fail


def test_lightning_wrapper_over_fewer_weighted_draws_than_samples_is_read_as_torch_reads_it(coloured_shards):
    """`WeightedRandomSampler(weights, num_samples=30)` over 45 samples, wrapped: the wrapper's `dataset` is the 30
    draws, not a data set, and the loader refused it ("built over 30 samples, but ... holds 45")."""
    dataset = dataio.ShardDataset(coloured_shards)

    def make():
        return wrapper(WeightedRandomSampler([1.0] * len(dataset), 30, generator=torch.Generator().manual_seed(5)),
                       num_replicas=2, rank=0, seed=0)

    sampler, twin = make(), make()
    loader = dataio.DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=0, normalize=False)
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        twin.set_epoch(epoch)
        assert _labels(loader) == [dataset.targets[i] for i in twin], epoch
    loader.close()
