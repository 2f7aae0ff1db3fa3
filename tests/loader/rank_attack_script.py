"""Rank attacks on issue 42's agreement and epoch digest; used by test_ranks.py, not a test module.

``torchrun --nproc-per-node 2 rank_attack_script.py MODE SHARDS OTHER OUT``. Each rank writes ``OUT/rank{r}.json``.
Modes: ``loop`` (loaders built in one loop; rank 0 also builds a validation loader there first), ``early``
(rank 1 breaks one batch early, then every rank checks the epoch), ``epochs`` (rank 0 alone rebuilds and reads a
validation loader each of 3 epochs; the time each epoch takes), ``data`` (rank 1 reads OTHER, a stale copy: run as
two copies of this script at two paths, launched by hand).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch.distributed as dist

import dataio

OPTIONS = {"batch_size": 4, "image_size": 16, "num_workers": 1, "seed": 5}


def main() -> None:
    mode, shards, other, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    record: dict = {}
    try:
        if mode == "loop":
            wanted = ["val", "train"] if rank == 0 else ["train"]  # validation on rank 0 only
            loaders = {}
            for name in wanted:
                loaders[name] = dataio.ImageLoader(shards, **{**OPTIONS, "batch_size": 1 if name == "val" else 4})
            if rank == 0:
                next(iter(loaders["val"]))
            record["ids"] = [b.samples.tolist() for b in loaders["train"].batches()]
        elif mode == "early":
            loader = dataio.ImageLoader(shards, **OPTIONS)
            batches = list(loader.batches())
            loader2 = dataio.ImageLoader(shards, **OPTIONS)
            read = []
            for i, batch in enumerate(loader2.batches()):
                read += batch.samples.tolist()
                if rank == 1 and i == len(batches) - 2:
                    break  # rank 1 never asks for its last batch
            record["read"] = read
            try:
                record["digest"] = dataio.check_epoch(loader2)
            except Exception as e:  # noqa: BLE001
                record["error"] = f"{type(e).__name__}: {e}"
        elif mode == "epochs":
            train = dataio.ImageLoader(shards, **OPTIONS)
            times = []
            for epoch in range(3):
                start = time.monotonic()
                train.set_epoch(epoch)
                for _ in train:
                    pass
                if rank == 0:  # pytorch/examples style: validate on rank 0, a loader made each epoch
                    val = dataio.ImageLoader(shards, **{**OPTIONS, "batch_size": 8})
                    for _ in val:
                        pass
                dist.barrier()
                times.append(time.monotonic() - start)
            record["times"] = times
        elif mode == "data":
            loader = dataio.ImageLoader(other if rank == 1 else shards, **OPTIONS)
            record["ids"] = [b.samples.tolist() for b in loader.batches()]
    except Exception as e:  # noqa: BLE001
        record["error"] = f"{type(e).__name__}: {e}"
    (out / f"rank{rank}.json").write_text(json.dumps(record))
    try:
        dist.barrier()
    except Exception:  # noqa: BLE001
        pass
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
