"""Two ranks that differ in what they read, or a loader read on rank 0 alone; used by test_rank_agreement.py, not a
test module.

``torchrun --nproc-per-node 2 agreement_script.py {data,weights,extra} SHARDS OTHER OUT``: ``data``: rank 1 reads
OTHER (a copy with one photo fewer); ``weights``: a mixture of SHARDS twice, weighted apart on rank 1; ``extra``:
rank 0 first reads one batch of another loader over SHARDS (a picture for a log), then both ranks read one pass.
Each rank writes ``OUT/rank{r}.json``: the sample ids it read, or the ``RanksDisagree`` it raised (then, once every
rank has raised, it exits 1).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

import dataio
from dataio.sampling.rank_agreement import RanksDisagree


def build(kind: str, shards: Path, other: Path, rank: int) -> dataio.ImageLoader:
    options = {"batch_size": 4, "image_size": 16, "num_workers": 1, "seed": 5}
    if kind == "data":
        return dataio.ImageLoader(other if rank == 1 else shards, **options)
    if kind == "weights":
        weights = {"a": 0.5, "b": 0.5} if rank == 0 else {"a": 0.7, "b": 0.3}
        return dataio.ImageLoader({"a": shards, "b": shards}, weights=weights, **options)
    return dataio.ImageLoader(shards, **options)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["data", "weights", "extra"])
    parser.add_argument("shards", type=Path)
    parser.add_argument("other", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if args.kind == "extra" and rank == 0:  # a look at the data on rank 0 only, with another batch size
        picture = dataio.ImageLoader(args.shards, batch_size=1, image_size=16, num_workers=1, seed=5)
        next(iter(picture))
    loader = build(args.kind, args.shards, args.other, rank)
    try:
        ids = [batch.samples.tolist() for batch in loader.batches()]
    except RanksDisagree as e:
        (args.out / f"rank{rank}.json").write_text(json.dumps({"error": str(e)}))
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))  # every rank raised, or this one fails
        sys.exit(1)
    for _ in ids:
        dist.all_reduce(torch.ones(1))
    (args.out / f"rank{rank}.json").write_text(json.dumps({"ids": ids}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
