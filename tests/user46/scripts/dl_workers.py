"""A plain torch DataLoader over ``dataio.ShardDataset(image_size=...)`` with 2 workers started by CONTEXT
(spawn or forkserver), the tier capped under ``if __name__ == "__main__":`` as scripts do (TIER ``default``: not
capped). Each worker prints its tier from ``worker_init_fn``; the parent prints the sha256 of every batch, shuffled
with a seeded generator. ``dl_workers.py SHARDS CONTEXT TIER``."""

import hashlib
import os
import sys

import torch

import dataio


def report(worker_id: int) -> None:
    os.write(1, f"worker {worker_id} tier {dataio.tier_in_use()}\n".encode())  # one write: the 2 workers' lines whole


if __name__ == "__main__":
    shards, context, tier = sys.argv[1:4]
    if tier != "default":
        dataio.use_tier(tier)
    dataset = dataio.ShardDataset(shards, image_size=48, normalize=True)
    loader = torch.utils.data.DataLoader(dataset, batch_size=8, shuffle=True, num_workers=2,
                                         multiprocessing_context=context, worker_init_fn=report,
                                         generator=torch.Generator().manual_seed(0))
    digest = hashlib.sha256()
    for images, labels in loader:
        digest.update(images.numpy().tobytes())
        digest.update(labels.numpy().tobytes())
    print(f"parent tier {dataio.tier_in_use()} digest {digest.hexdigest()}", flush=True)
