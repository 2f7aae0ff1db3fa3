"""``torch.multiprocessing.spawn`` of 2 gloo ranks, each handed loaders built in the parent (pickled into it, as
Lightning's ``ddp_spawn`` does): an ``ImageLoader`` (a training loop: model, DDP, SGD) and a ``dataio.DataLoader``.
The tier is capped under ``if __name__ == "__main__":`` (TIER ``default``: not capped). Each rank prints the tier it
starts and ends at, the sha256 of its batches and its last loss. ``spawn_ranks.py SHARDS TIER PORT``."""

import hashlib
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import dataio


def rank_main(rank: int, loaders: dict, port: str) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", port
    os.write(1, f"rank {rank} start tier {dataio.tier_in_use()}\n".encode())  # one write: whole lines
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    classes = len(loaders["train"].dataset.classes)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Flatten(),
                                                                          torch.nn.Linear(3 * 48 * 48, classes)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    digest, loss = hashlib.sha256(), None
    train = loaders["train"]
    for epoch in range(2):
        train.set_epoch(epoch)
        for images, labels in train:
            digest.update(images.contiguous().numpy().tobytes())
            digest.update(labels.numpy().tobytes())
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    for images, labels in loaders["eval"]:
        digest.update(images.contiguous().numpy().tobytes())
    os.write(1, f"rank {rank} end tier {dataio.tier_in_use()} digest {digest.hexdigest()} loss {loss.item():.6f}\n"
             .encode())
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    shards, tier, port = sys.argv[1:4]
    if tier != "default":
        dataio.use_tier(tier)
    loaders = {"train": dataio.ImageLoader(shards, batch_size=8, image_size=48, train=True, seed=0, normalize=True),
               "eval": dataio.DataLoader(shards, batch_size=8, image_size=48)}
    mp.spawn(rank_main, args=(loaders, port), nprocs=2)
    print(f"parent tier {dataio.tier_in_use()}", flush=True)
