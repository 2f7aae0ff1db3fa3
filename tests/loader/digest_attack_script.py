"""Epoch digest under patterns users write; used by test_digest_attack.py, not a test module.

``torchrun --nproc-per-node N digest_attack_script.py SHARDS OUT``: each rank writes OUT/rank{r}.json with each
check's digest dict (ok flag) or its error."""

from __future__ import annotations

import argparse
import json
import traceback
from pathlib import Path

import torch.distributed as dist

import dataio

OPTIONS = {"batch_size": 4, "image_size": 16, "num_workers": 1, "seed": 5}


def checked(loader, epochs=1, set_epoch=True, stop_after=None):
    out = []
    for epoch in range(epochs):
        if set_epoch and hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        for i, _ in enumerate(loader):
            if stop_after is not None and i + 1 >= stop_after:
                break
        try:
            digest = dataio.check_epoch(loader)
            out.append({"ok": bool(digest.get("ok", True)) if isinstance(digest, dict) else True})
        except Exception as e:  # EpochMismatch or anything else: record its type and line
            out.append({"error": f"{type(e).__name__}: {e}"[:400]})
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("shards", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("case")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, last = dist.get_rank(), dist.get_world_size() - 1
    record = {}
    try:
        if args.case == "no_set_epoch":
            record["r"] = checked(dataio.ImageLoader(args.shards, **OPTIONS), epochs=3, set_epoch=False)
        elif args.case == "set_epoch":
            record["r"] = checked(dataio.ImageLoader(args.shards, **OPTIONS), epochs=3, set_epoch=True)
        elif args.case == "mixture_epochs":
            mixture = dataio.ImageLoader({"a": args.shards, "b": args.shards}, weights={"a": 0.7, "b": 0.3},
                                         **OPTIONS)
            record["r"] = checked(mixture, epochs=3, set_epoch=False)
        elif args.case == "mixture_set_epoch":
            mixture = dataio.ImageLoader({"a": args.shards, "b": args.shards}, weights={"a": 0.7, "b": 0.3},
                                         **OPTIONS)
            record["r"] = checked(mixture, epochs=3, set_epoch=True)
        elif args.case == "break_early":
            loader = dataio.ImageLoader(args.shards, **OPTIONS)
            record["r"] = checked(loader, stop_after=1 if rank == last else None)
        elif args.case == "mixture_break_early":
            mixture = dataio.ImageLoader({"a": args.shards, "b": args.shards}, weights={"a": 0.7, "b": 0.3},
                                         **OPTIONS)
            record["r"] = checked(mixture, stop_after=1 if rank == last else None)
    except BaseException:
        record["crash"] = traceback.format_exc()[-1500:]
    (args.out / f"rank{rank}.json").write_text(json.dumps(record))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
