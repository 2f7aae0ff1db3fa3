"""nanoGPT's way of seeding, passed to dataio; used by test_frameworks_late_world.py, not a test module.

``torchrun --nproc-per-node 2 seed_per_rank_script.py {text,image} SHARDS OUT [--same-seed]``: each rank seeds
its loader with ``1337 + rank`` (nanoGPT's ``seed_offset``), or with 1337 on every rank with ``--same-seed``,
then reads one pass, all-reducing once a step as DDP does. Each rank that finishes writes ``OUT/rank{r}.json``
with the sample ids it read and the data set's size. With ``--peek`` the loader is built before the process group
and one batch is read from it then (a look at the data's shapes), as a script may before ``init_process_group``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist

import dataio


def read_pass(loader, kind: str) -> list[list[int]]:
    """The sample ids of each batch of one pass."""
    if kind == "text":
        return [batch["sample_ids"].tolist() for batch in loader]
    return [batch.samples.tolist() for batch in loader.batches()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["text", "image"])
    parser.add_argument("shards", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--same-seed", action="store_true")
    parser.add_argument("--peek", action="store_true")
    args = parser.parse_args()
    if not args.peek:
        dist.init_process_group("gloo")
    rank = int(os.environ["RANK"])
    seed = 1337 if args.same_seed else 1337 + rank
    if args.kind == "text":
        loader = dataio.TextLoader(args.shards, mode="fixed", batch_size=8, seed=seed)
    else:
        loader = dataio.ImageLoader(args.shards, batch_size=4, image_size=16, num_workers=1, seed=seed)
    if args.peek:
        next(iter(loader))  # one batch before the process group exists (world size 1 then)
        dist.init_process_group("gloo")
    ids = read_pass(loader, args.kind)
    for _ in ids:
        dist.all_reduce(torch.ones(1))
    (args.out / f"rank{rank}.json").write_text(json.dumps({"ids": ids, "samples": len(loader.dataset)}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
