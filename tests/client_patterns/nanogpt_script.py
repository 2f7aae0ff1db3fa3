"""A nanoGPT-style training loop with ``get_batch`` swapped for ``dataio.TextLoader``; used by
tests/client_patterns/test_user_patterns.py, not a test module.

``torchrun --nproc-per-node 2 nanogpt_script.py TRAIN VAL OUT [--iters N] [--eval-interval K] [--eval-iters E]``

As nanoGPT's train.py: every rank draws training batches from an endless iterator over a ``pack``-mode loader;
every ``eval_interval`` iterations the master process alone estimates the loss (``estimate_loss``) over
``eval_iters`` batches of each split, the loaders for it made by the ``get_loader(split)`` helper that replaced
``get_batch(split)``. Each rank writes ``OUT/rank{r}.json``: the seconds each eval took on rank 0, the whole loop's.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

from dataio import TextLoader

BLOCK, BATCH = 32, 4
folders: dict[str, Path] = {}


def get_loader(split):  # was get_batch(split): np.memmap of train.bin / val.bin
    return TextLoader(folders[split], mode="pack", block_size=BLOCK, batch_size=BATCH, ignore_index=-1)


def endless(loader):
    while True:
        yield from loader


@torch.no_grad()
def estimate_loss(model, eval_iters):
    out = {}
    model.eval()
    for split in ["train", "val"]:
        losses = []
        for _, batch in zip(range(eval_iters), get_loader(split)):
            logits = model(batch["input_ids"])
            losses.append(torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(),
                                                            ignore_index=-1).item())
        out[split] = sum(losses) / len(losses)
    model.train()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("train", type=Path)
    parser.add_argument("val", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--iters", type=int, default=12)
    parser.add_argument("--eval-interval", type=int, default=4)
    parser.add_argument("--eval-iters", type=int, default=2)
    args = parser.parse_args()
    folders.update(train=args.train, val=args.val)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    master_process = rank == 0
    torch.manual_seed(1337 + rank)  # nanoGPT's seed_offset: the model's randomness, per rank
    train_loader = get_loader("train")
    vocab = train_loader.vocab_size
    model = torch.nn.Sequential(torch.nn.Embedding(vocab, 16), torch.nn.Linear(16, vocab))
    for p in model.parameters():
        dist.broadcast(p.data, 0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = endless(train_loader)
    evals, start = [], time.perf_counter()
    for iter_num in range(args.iters):
        if iter_num % args.eval_interval == 0 and master_process:
            t0 = time.perf_counter()
            estimate_loss(model, args.eval_iters)
            evals.append(time.perf_counter() - t0)
        batch = next(batches)
        logits = model(batch["input_ids"])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        for p in model.parameters():  # DDP's all-reduce
            dist.all_reduce(p.grad)
        optimizer.step()
    dist.barrier()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"rank{rank}.json").write_text(json.dumps({"evals": evals, "seconds": time.perf_counter() - start}))
    dist.barrier()
    os._exit(0)


if __name__ == "__main__":
    main()
