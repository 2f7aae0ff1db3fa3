"""Two gloo ranks reading one folder with the drop-in and the native face; used by test_dropin_ranks.py, not a test
module.

``torchrun --nproc-per-node 2 dropin_ranks_script.py SHARDS OUT``: each rank writes ``OUT/rank{r}.json`` with the
sample ids each loader yielded (repeats as -1), what torch's DataLoader yields over the same sampler, and how long
rank 0's evaluation (built on both ranks, iterated on rank 0 alone, then a barrier: open_clip's pattern) took.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from lightning.pytorch.overrides.distributed import UnrepeatedDistributedSamplerWrapper
from torch.utils.data import DistributedSampler, SequentialSampler

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout
import dataio  # noqa: E402

OPTIONS = dict(batch_size=4, num_workers=1, image_size=16, normalize=False)


def ids(loader) -> list[int]:
    """Every sample id of one pass, a padding repeat as -1."""
    return [-1 if r else int(i) for b in loader.batches() for i, r in zip(b.samples, b.repeated, strict=True)]


def main() -> None:
    shards, out = Path(sys.argv[1]), Path(sys.argv[2])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    size = len(dataio.ImageLoader(shards, shard=False, **OPTIONS).dataset)
    record: dict = {"size": size}
    whole = dataio.DataLoader(shards, **OPTIONS)  # no sampler: torch's semantics, the whole set on each rank
    record["whole"] = [ids(whole), ids(whole)]  # two passes: the line is said once
    sampler = DistributedSampler(range(size), shuffle=False)
    record["sampler"] = ids(dataio.DataLoader(shards, sampler=sampler, **OPTIONS))
    record["sampler_torch"] = [int(i) for b in torch.utils.data.DataLoader(range(size), batch_size=4,
                                                                          sampler=sampler) for i in b]
    record["sampler_own"] = list(sampler)
    unrepeated = UnrepeatedDistributedSamplerWrapper(SequentialSampler(range(size)), shuffle=False)  # predict
    record["unrepeated"] = ids(dataio.DataLoader(shards, sampler=unrepeated, **OPTIONS))
    record["unrepeated_own"] = list(unrepeated)
    record["native"] = ids(dataio.ImageLoader(shards, **OPTIONS))  # the face: the process group's shares
    evaluation = dataio.DataLoader(shards, **OPTIONS)  # built on every rank, as open_clip does
    record["eval_seconds"], record["eval"] = 0.0, []
    if rank == 0:
        start = time.perf_counter()
        record["eval"] = ids(evaluation)
        record["eval_seconds"] = time.perf_counter() - start
    one_rank = dataio.ImageLoader(shards, shard=False, **OPTIONS)  # the native face's keyword: the whole set
    record["one_rank"] = ids(one_rank) if rank == 0 else []
    dist.barrier()
    (out / f"rank{rank}.json").write_text(json.dumps(record))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
