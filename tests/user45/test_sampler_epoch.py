"""Found while checking issue 45's torchrun batches (not about tiers): a second pass over one `dataio.DataLoader`
after the same `sampler.set_epoch(0)` does not read what torch's DataLoader over that sampler reads. docs/
dataloader.md promises "exactly the indices the sampler yields on this rank, in its order, after
sampler.set_epoch(epoch): as torch's DataLoader over it". The loader follows the sampler's epoch only when it moved
since the last one it followed (`_follow_sampler_epoch`), and its own epoch advanced after the first pass: the
second pass reads epoch 1's order, the third epoch 0's again."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data.distributed import DistributedSampler

import dataio


@pytest.mark.xfail(strict=True, reason="dataio.DataLoader ignores a repeated sampler.set_epoch(0) on every other "
                   "pass (epoch_position._follow_sampler_epoch follows the sampler's epoch only when it moved); "
                   "the epoch-following rules tie into state_dict/resume: not a small fix")
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
