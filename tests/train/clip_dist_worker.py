"""One rank of the two-process CLIP test (tests/train/test_clip_distributed.py); not a test module.

Under ``torchrun --nproc_per_node 2`` (gloo): each rank holds part of one global batch of 8 pairs, unequal
on purpose (rank 0 rows 0-4 and a padding repeat of row 0, rank 1 rows 5-7), runs ``ClipTask.loss`` through
DDP for each ``ClipLoss`` option, and saves its loss and the DDP-averaged gradients; then evaluates a
13-pair validation set dealt over the two ranks (one padding repeat). The test compares all of it with
one process on the whole batch and set.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from dataio.train.clip_loss import ClipLoss
from dataio.train.clip_task import ClipTask
from dataio.train.config import TrainConfig
from dataio.train.models.clip_towers import ClipTowers
from tests.train.pair_stand_in import make_pairs, stand_in_factory

TOWERS = ClipTowers(embed_dim=32, text_width=32, text_layers=1, text_heads=2)
OPTIONS = [(local, with_grad) for local in (True, False) for with_grad in (True, False)]
ROWS = {0: [0, 1, 2, 3, 4, 0], 1: [5, 6, 7]}


def task_for(rank: int, world: int, batch_size: int, loss: ClipLoss | None = None) -> ClipTask:
    config = TrainConfig(train=".", val=".", image_size=32, batch_size=batch_size, world_size=world, rank=rank,
                         channels_last=False)
    return ClipTask(config, torch.device("cpu"), stand_in_factory(make_pairs(8), make_pairs(13, seed=1)),
                    towers=TOWERS, clip_loss=loss)


def model_for(task: ClipTask) -> nn.Module:
    torch.manual_seed(0)  # the same weights on every rank and in the test's single process
    return task.build_model().eval()  # BatchNorm on running statistics: a row's features ignore its batch


def batch_of(rows: list[int], repeated: list[bool]) -> dict[str, torch.Tensor]:
    pairs = make_pairs(8)
    index = torch.tensor(rows)
    return {"image": pairs.images[index], "input_ids": pairs.input_ids[index],
            "attention_mask": pairs.attention_mask[index], "sample_ids": index, "repeated": torch.tensor(repeated)}


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    batch = batch_of(ROWS[rank], [False] * len(ROWS[rank]) if rank else [False] * 5 + [True])
    results: dict[str, object] = {}
    for local, with_grad in OPTIONS:
        task = task_for(rank, world, 4, ClipLoss(local_loss=local, gather_with_grad=with_grad))
        model = model_for(task)
        network = nn.parallel.DistributedDataParallel(model)
        loss, rows = task.loss(network, batch)
        loss.backward()  # DDP averages the gradients over the ranks
        results[f"{local}-{with_grad}"] = {"loss": loss.item(), "rows": rows,
                                          "grads": {n: p.grad.clone() for n, p in model.named_parameters()}}
    task = task_for(rank, world, 4)
    results["evaluate"] = task.evaluate(nn.parallel.DistributedDataParallel(model_for(task)))
    torch.save(results, Path(sys.argv[1]) / f"rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
