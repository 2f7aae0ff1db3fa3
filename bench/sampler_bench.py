"""``dataio bench sampler``: how well the two-level shuffle mixes shards, and what it costs.

For an ImageNet-like layout (1,281,167 samples in 1,024 shards of ~1,251),
per shuffle window: the share of adjacent pairs in a batch that come from the
same shard (``partition.same_shard_rate``; a perfect global shuffle gives the
sum of squared shard shares, about 0.001), how many distinct shards 1,024
consecutive reads touch (locality: fewer is kinder to the page cache and to
streaming), and the time to build one epoch's order and one rank's share.
Pure numpy; no data is read.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dataio.bench.report import format_table, machine_description, write_results
from dataio.sampling import partition


@dataclass(frozen=True, kw_only=True)
class BenchSamplerConfig:
    """Options of the sampler benchmark."""

    out: Path = Path("bench/results")
    num_samples: int = 1_281_167
    num_shards: int = 1024
    batch_size: int = 256
    world_size: int = 8
    windows: tuple[int, ...] = (1, 4096, 16384, 65536, 262144)

    def __post_init__(self) -> None:
        if min(self.num_samples, self.num_shards, self.batch_size, self.world_size, *self.windows) < 1:
            raise ValueError("every option must be >= 1")


def bench_sampler(config: BenchSamplerConfig) -> dict:
    c = config
    shards = np.minimum(np.arange(c.num_samples) * c.num_shards // c.num_samples, c.num_shards - 1)
    rows = []
    for window in c.windows:
        started = time.perf_counter()
        order = partition.epoch_order(shards, seed=0, epoch=0, window=window)
        order_s = time.perf_counter() - started
        started = time.perf_counter()
        positions, _ = partition.rank_share(c.num_samples, world_size=c.world_size, rank=0, drop_last=False)
        samples = order[positions]
        share_s = time.perf_counter() - started
        batches = [samples[i:i + c.batch_size] for i in range(0, len(samples), c.batch_size)]
        reads = [len(np.unique(shards[order[i:i + 1024]])) for i in range(0, len(order) - 1024, 1024 * 64)]
        rows.append({"window": window, "same_shard_rate": partition.same_shard_rate(batches, shards),
                     "shards_per_1024_reads": float(np.mean(reads)), "order_s": order_s, "share_s": share_s})
    result = {
        "date": datetime.date.today().isoformat(), "machine": machine_description(), "config": {
            "num_samples": c.num_samples, "num_shards": c.num_shards, "batch_size": c.batch_size,
            "world_size": c.world_size},
        "random_same_shard_rate": partition.random_same_shard_rate(shards), "rows": rows,
    }
    print(f"dataio bench sampler: {c.num_samples:,} samples in {c.num_shards} shards, batch {c.batch_size}, "
          f"rank 0 of {c.world_size}")
    print(format_table(rows, [("window", "window", ","), ("same_shard_rate", "same-shard pairs", ".4f"),
                              ("shards_per_1024_reads", "shards/1024 reads", ".1f"),
                              ("order_s", "epoch order s", ".3f"), ("share_s", "rank share s", ".3f")]))
    print(f"a perfect global shuffle: same-shard pairs {result['random_same_shard_rate']:.4f}")
    write_results(c.out, "sampler", result, {f"window {r['window']:,}": 100 * r["same_shard_rate"] for r in rows},
                  "adjacent pairs in a batch from the same shard (%)")
    return result
