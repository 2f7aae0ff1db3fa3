"""A pytorch/examples-style ImageNet DDP script with the one-line swap to ``dataio.DataLoader``; used by
tests/client_patterns/test_user_patterns.py, not a test module.

``torchrun --nproc-per-node 2 imagenet_ddp_script.py TRAIN VAL OUT [--epochs N] [--rebuild] [--val-rank0]
[--loop EXTRA ...] [--text]``

- the loaders are built by one helper called twice (train and val), as the examples' ``main_worker`` does;
- ``--rebuild``: the training loader is built again at every epoch (scripts that change the batch size or the
  resolution per epoch do);
- ``--val-rank0``: validation runs on rank 0 alone (its loader built and read there only), the others wait at
  a barrier;
- ``--loop``: more folders read each epoch through loaders built in a loop over the data sets;
- ``--val-rank0-each-epoch``: rank 0 alone validates each epoch on a validation loader built for it;
- ``--eval-root R --eval-sets A B ...``: evaluation folders ``R/A``, ... (their names a ``set``, deduplicated),
  each given a loader in a dict comprehension, evaluated by every rank after each epoch in sorted order.

Each rank writes (once its loaders are built, and after each epoch) ``OUT/rank{r}.json``: the sample ids of each epoch, the validation ids and each epoch's wall
time (from before the loaders are built to after the barrier that ends the epoch).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

import dataio


def build_loader(folder, train, batch_size=4):
    # the examples' train_loader / val_loader, swapped to dataio with one line each; the examples deal both with a
    # DistributedSampler, which shard=True stands for (the drop-in alone reads the whole set, as torch's loader)
    return dataio.DataLoader(str(folder), batch_size=batch_size, shuffle=train, num_workers=1, image_size=16,
                             shard=True)


def validate(loader, model):
    seen = 0
    with torch.no_grad():
        for batch in loader.with_ids() if hasattr(loader, "with_ids") else loader:
            seen += len(batch[1])
    return seen


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("train", type=Path)
    parser.add_argument("val", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--val-rank0", action="store_true")
    parser.add_argument("--loop", type=Path, nargs="*", default=[])
    parser.add_argument("--val-rank0-each-epoch", action="store_true")
    parser.add_argument("--eval-root", type=Path)
    parser.add_argument("--eval-sets", nargs="*", default=[])
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(3 * 16 * 16, 10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    args.out.mkdir(parents=True, exist_ok=True)
    record = {"rank": rank, "epochs": [], "val": [], "loop": [], "seconds": []}
    dist.barrier()
    start = time.perf_counter()
    train_loader = build_loader(args.train, True)
    val_loader = None if args.val_rank0 and rank != 0 else build_loader(args.val, False)
    eval_sets = set(args.eval_sets)  # deduplicated, as the command line may name a set twice
    eval_loaders = {name: build_loader(args.eval_root / name, False) for name in eval_sets}
    record["eval_order"], record["eval"] = list(eval_sets), {}
    (args.out / f"rank{rank}.json").write_text(json.dumps(record))
    for epoch in range(args.epochs):
        t0 = time.perf_counter()
        if args.rebuild and epoch:
            train_loader = build_loader(args.train, True)
        train_loader.sampler.set_epoch(epoch)
        ids = []
        for batch in train_loader.with_ids():
            ids.extend(int(i) for i in batch.samples)
            loss = torch.nn.functional.cross_entropy(model(batch.images.flatten(1)), batch.labels)
            optimizer.zero_grad()
            loss.backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
            optimizer.step()
        record["epochs"].append(ids)
        extra = []
        for folder in args.loop:  # loaders built in a loop over data sets
            loader = dataio.DataLoader(str(folder), batch_size=4, shuffle=True, num_workers=1, image_size=16,
                                       shard=True)
            loader.sampler.set_epoch(epoch)
            extra.append(sum(len(b[1]) for b in loader))
        record["loop"].append(extra)
        if val_loader is not None:
            record["val"].append(validate(val_loader, model))
        if args.val_rank0_each_epoch and rank == 0:  # a fresh validation loader each epoch, on rank 0
            record["val"].append(validate(build_loader(args.val, False), model))
        for name in sorted(eval_loaders):
            record["eval"].setdefault(name, []).append(validate(eval_loaders[name], model))
        dist.barrier()
        record["seconds"].append(time.perf_counter() - t0)
        (args.out / f"rank{rank}.json").write_text(json.dumps(record))
    record["total"] = time.perf_counter() - start
    (args.out / f"rank{rank}.json").write_text(json.dumps(record))
    dist.barrier()
    os._exit(0)  # gloo's teardown aborts now and then on torch 2.13 (docs/dataloader.md)


if __name__ == "__main__":
    main()
