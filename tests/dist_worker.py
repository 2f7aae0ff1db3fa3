"""One rank of the two-process ``torchrun`` tests (tests/test_distributed.py); not a test module.

Reads rank and world size from the initialised gloo process group (the
loaders do), records the sample ids of every batch, all-reduces once per step
as DDP does (unequal step counts would hang here, and the test's timeout would
catch it), saves the loader state after every step, and can stop abruptly
after ``--stop-after`` steps as if killed.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["image", "text"])
    parser.add_argument("shards", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--resume", type=Path)
    parser.add_argument("--stop-after", type=int)
    parser.add_argument("--drop-last", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if args.kind == "image":
        from dataio import ImageLoader

        loader = ImageLoader(args.shards, batch_size=4, image_size=16, num_workers=1, seed=7,
                             drop_last=args.drop_last)
        batches = ((b.samples.tolist(), b.repeated.tolist()) for b in loader.batches())
    else:
        from dataio import TextLoader

        loader = TextLoader(args.shards, mode="budget", max_tokens=600, seed=7, drop_last=args.drop_last)
        batches = ((b["sample_ids"].tolist(), b["repeated"].tolist()) for b in loader)
    if args.resume:
        loader.load_state_dict(json.loads(args.resume.read_text()))
    record = {"rank": rank, "world_size": loader.world_size, "batches": [], "repeated": []}
    args.out.mkdir(parents=True, exist_ok=True)
    for step, (samples, repeated) in enumerate(batches, 1):
        record["batches"].append(samples)
        record["repeated"].append(repeated)
        flag = torch.ones(1)
        dist.all_reduce(flag)  # a rank with fewer steps would leave the others waiting here
        state = loader.state_dict()
        (args.out / f"rank{rank}.json").write_text(json.dumps(record))
        if rank == 0:  # checkpoint: written whole, then renamed
            tmp = args.out / "state.json.tmp"
            tmp.write_text(json.dumps(state))
            os.replace(tmp, args.out / "state.json")
        if args.stop_after and step == args.stop_after:
            dist.barrier()
            os._exit(0)  # abrupt: no cleanup, as after a kill
    (args.out / f"rank{rank}.json").write_text(json.dumps(record))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
