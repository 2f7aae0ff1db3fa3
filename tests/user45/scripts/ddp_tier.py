"""A plain ``torchrun`` script (gloo, CPU): each rank reads its share of SHARDS with ``dataio.DataLoader`` and a
``DistributedSampler`` twice, and prints its crop-resize tier and the digest of its batches each time: first as
the script starts (whatever DATAIO_CPU_TIER says), then after ``use_tier(os.environ["DATAIO_CPU_TIER"])``, the
call docs/read.md (CPU tiers) gives a script that wants the variable. ``ddp_tier.py SHARDS``."""

import hashlib
import os
import sys

import torch.distributed as dist
from torch.utils.data.distributed import DistributedSampler

import dataio
from dataio.formats.jpeg.cpu_tier import tier_in_use, use_tier

dist.init_process_group("gloo")
rank = dist.get_rank()
dataset = dataio.ShardDataset(sys.argv[1])
for when in ("start", "use_tier"):
    if when == "use_tier":
        use_tier(os.environ["DATAIO_CPU_TIER"])
    # a new loader per pass: a second pass over one loader after the same sampler.set_epoch(0) reads another
    # order (test_sampler_epoch.py)
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = dataio.DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=1)
    sampler.set_epoch(0)
    digest = hashlib.sha256()
    for images, labels in loader:
        digest.update(images.numpy().tobytes())
    print(f"rank {rank} {when} tier {tier_in_use()} digest {digest.hexdigest()[:16]}", flush=True)
dist.barrier()
os._exit(0)  # docs/dataloader.md: torch 2.13's gloo teardown aborts now and then; every rank has printed
