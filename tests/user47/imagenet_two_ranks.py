"""A pytorch/examples ImageNet-style epoch loop on 2 gloo ranks (torch.multiprocessing.spawn), not a test module.

``python imagenet_two_ranks.py SHARDS NUM_WORKERS``: each rank builds a ``DistributedSampler`` and a
``dataio.DataLoader(dataset, sampler=...)``, and each epoch calls ``set_epoch`` (on the sampler, or through
``train_loader.sampler``), then ``len(train_loader)`` (the examples' ``ProgressMeter``), then reads the pass. A
second loader then starts at epoch 3 as the examples' ``--resume`` does (a new sampler, ``set_epoch(3)``, no loader
state). Every pass must yield the labels torch's DataLoader yields over the same sampler, and the ranks' samples of an
epoch must be disjoint; a mismatch is printed to stderr and the process exits 1.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader as TorchLoader
from torch.utils.data import DistributedSampler

import dataio


def torch_labels(targets, sampler) -> list[int]:
    return [int(x) for b in TorchLoader(targets, batch_size=4, sampler=sampler) for x in b]


def worker(rank: int, shards: str, num_workers: int, port: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    dataset = dataio.ShardDataset(shards)
    targets = list(dataset.targets)
    extra = {"persistent_workers": True} if num_workers else {}
    failures = []

    def check(loader, sampler, epoch, name):
        want = torch_labels(targets, sampler)  # what torch's loader reads now, before dataio touches the sampler
        progress = len(loader)  # ProgressMeter(len(train_loader), ...) before the loop, after set_epoch
        got = [int(x) for _, labels in loader for x in labels]
        if got != want or progress != len(TorchLoader(targets, batch_size=4, sampler=sampler)):
            failures.append(f"rank {rank} {name} epoch {epoch}: dataio {got} (len {progress}), torch {want}")
        everyone = [None, None]
        dist.all_gather_object(everyone, got)
        if set(everyone[0]) & set(everyone[1]):
            failures.append(f"rank {rank} {name} epoch {epoch}: ranks overlap")

    sampler = DistributedSampler(dataset, shuffle=True, seed=1)
    loader = dataio.DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=num_workers, normalize=False,
                               **extra)
    for epoch in range(3):
        (sampler if epoch % 2 == 0 else loader.sampler).set_epoch(epoch)
        check(loader, sampler, epoch, "train")
    loader.close()

    resumed_sampler = DistributedSampler(dataset, shuffle=True, seed=1)  # --resume: start_epoch from the checkpoint
    resumed = dataio.DataLoader(dataset, batch_size=4, sampler=resumed_sampler, num_workers=num_workers,
                                normalize=False, **extra)
    for epoch in (3, 4):
        resumed_sampler.set_epoch(epoch)
        check(resumed, resumed_sampler, epoch, "resumed")
    resumed.close()
    dist.destroy_process_group()
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1], int(sys.argv[2]), sys.argv[3]), nprocs=2)
