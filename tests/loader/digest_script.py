"""Passes checked by the epoch digest on 2 or 3 gloo ranks; used by test_epoch_digest.py, not a test module.

``torchrun --nproc-per-node N digest_script.py SHARDS OUT``: on one loader, a clean pass, a pass where the last
rank also reads rank 0's first sample (read twice), one where it drops its first (never read), and a pass resumed
from a mid-epoch state; then a mixture whose last rank reads a sample of another source in place of one of its
own (a share off its plan). Each rank writes ``OUT/rank{r}.json``: each check's digest, or its ``EpochMismatch``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch.distributed as dist

import dataio
from dataio.loader.epoch_check import EpochMismatch
from dataio.pipeline.pass_plan import PassPlan

OPTIONS = {"batch_size": 4, "image_size": 16, "num_workers": 1, "seed": 5}


def injected(loader, change) -> None:
    """The loader's pass plan, changed by ``change(ids, repeated, offsets)`` (a faulty sampler on this rank)."""
    original = type(loader).pass_plan

    def pass_plan(self=loader) -> PassPlan:
        plan = original(self)
        ids, repeated, offsets = change(plan.ids.copy(), plan.repeated.copy(), plan.offsets.copy())
        units = plan.units.copy()
        units[-1] += len(ids) - len(plan.ids)
        return PassPlan(ids, repeated, offsets, units, plan.steps)

    loader.pass_plan = pass_plan


def check(loader, passes: int = 1) -> dict:
    for _ in range(passes):
        for _ in loader:
            pass
    try:
        return dataio.check_epoch(loader)
    except EpochMismatch as e:
        return {"error": str(e)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("shards", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, last = dist.get_rank(), dist.get_world_size() - 1
    loader = dataio.ImageLoader(args.shards, **OPTIONS)
    record = {"clean": check(loader)}
    first_of_rank_0 = int(loader.order()[0])  # rank 0's first position in every epoch's order
    if rank == last:
        injected(loader, lambda ids, rep, off: (np.append(ids, first_of_rank_0), np.append(rep, False),
                                                np.append(off[:-1], off[-1] + 1)))
    record["twice"] = check(loader)
    if rank == last:
        loader.pass_plan = lambda: type(loader).pass_plan(loader)  # the sampler mended
        injected(loader, lambda ids, rep, off: (ids, np.concatenate([[True], rep[1:]]), off))
    record["never"] = check(loader)
    fresh = dataio.ImageLoader(args.shards, **OPTIONS)
    batches = iter(fresh)
    next(batches), next(batches)
    state = fresh.state_dict()
    resumed = dataio.ImageLoader(args.shards, **OPTIONS)
    resumed.load_state_dict(state)
    record["resumed"] = check(resumed)
    mixture = dataio.ImageLoader({"a": args.shards, "b": args.shards}, weights={"a": 0.8, "b": 0.2}, **OPTIONS)
    if rank == last:
        planned_b = set(mixture.order()[mixture.mixture.source_of(mixture.order()) == 1].tolist())
        unread_b = next(i for i in range(len(mixture.mixture.source_of(np.arange(90))))
                        if mixture.mixture.source_of(np.array([i]))[0] == 1 and i not in planned_b)

        def swap(ids, rep, off):
            a = next(k for k, i in enumerate(ids) if mixture.mixture.source_of(np.array([i]))[0] == 0)
            ids[a] = unread_b
            return ids, rep, off

        injected(mixture, swap)
    record["mixture"] = check(mixture)
    (args.out / f"rank{rank}.json").write_text(json.dumps(record))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
