"""HF Accelerate's evaluation idioms on a ``TextLoader``; used by test_accelerate_text_gather.py, not a test module.

``torchrun --nproc-per-node 2 accelerate_text_script.py SHARDS OUT MODE BATCH``: the loader is built before
``Accelerator()`` (no process group yet), then one evaluation pass gathers, as Hugging Face's ``no_trainer`` scripts
do, each row's real tokens and sample id with ``gather_for_metrics``, and the step's loss repeated to the batch
size (``run_clm_no_trainer.py``'s ``loss.repeat(per_device_eval_batch_size)``). Each rank writes
``OUT/rank{r}.json``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
from accelerate import Accelerator

import dataio


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("shards", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("mode", choices=["fixed", "pack"])
    parser.add_argument("batch", type=int)
    args = parser.parse_args()
    loader = dataio.TextLoader(args.shards, mode=args.mode, batch_size=args.batch, block_size=64, shuffle=False)
    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(torch.nn.Embedding(loader.vocab_size, 8))
    loader = accelerator.prepare(loader)
    tokens, ids, losses, repeated = [], [], [], 0
    with torch.no_grad():
        for batch in loader:
            loss = model(batch["input_ids"]).float().pow(2).mean()
            rows = batch["attention_mask"].sum(1)
            sample_ids = batch["sample_ids"] if "sample_ids" in batch else torch.zeros_like(rows)
            rows, sample_ids = accelerator.gather_for_metrics((rows, sample_ids))
            tokens += rows.tolist()
            ids += sample_ids.tolist()
            losses.append(accelerator.gather_for_metrics(loss.repeat(args.batch)))
            repeated += int(batch["repeated"].sum())
    record = {"tokens": tokens, "ids": ids, "losses": len(torch.cat(losses)), "repeated": repeated,
              "world": [loader.world_size, loader.rank]}
    (args.out / f"rank{accelerator.process_index}.json").write_text(json.dumps(record))
    accelerator.wait_for_everyone()  # every rank has written its results
    # torch 2.13's gloo teardown (destroy_process_group, or interpreter exit) aborts 3 runs in 14 of a plain
    # Accelerate script without dataio on this 2-core machine under load (SIGABRT, 'terminate called without an
    # active exception'); leaving without it: 0 in 14. The results are written: leave.
    os._exit(0)


if __name__ == "__main__":
    main()
