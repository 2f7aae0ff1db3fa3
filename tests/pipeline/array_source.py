"""A kind of sample in under 100 lines (docs/architecture.md, "Adding a kind of sample"): each sample is two numpy
arrays of different shapes, made from its id, read through the loader skeleton (``dataio.loader.SampleLoader``).

A real source would read its shards here; this one computes each sample, so a test knows what every batch must
hold. Samples in ``bad`` fail to read, as a damaged member would: the driver's error policy handles them.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from dataio.formats.errors import SampleError
from dataio.pipeline.host_batch import HostBatch
from dataio.pipeline.pass_plan import PassPlan
from dataio.pipeline.sample_source import BatchStart, Failures, drop_samples

SHAPES = {"vector": ((4,), np.float32), "grid": ((2, 3), np.int64)}  # the fields: name -> (shape, dtype)


def expected(sample: int) -> dict[str, np.ndarray]:
    """What sample ``sample`` holds: arrays drawn from a generator seeded by its id."""
    rng = np.random.default_rng(sample)
    return {"vector": rng.random(4, dtype=np.float32), "grid": rng.integers(0, 100, (2, 3))}


class ArraySource:
    """``count`` samples in ``shards`` shards (for the two-level shuffle); samples in ``bad`` fail."""

    name = "arrays"

    def __init__(self, count: int, *, shards: int = 3, bad: Iterable[int] = ()) -> None:
        self.count, self.bad = count, set(bad)
        self.shard_of = np.arange(count) * shards // count  # contiguous shards, as a packer writes them

    def __len__(self) -> int:
        return self.count

    def fingerprint(self) -> str:
        return f"arrays-{self.count}-{sorted(self.bad)}"

    def begin_pass(self, plan: PassPlan) -> None:
        pass

    def end_pass(self) -> None:
        pass

    def start_batch(self, index: int, ids: np.ndarray, key: object) -> BatchStart:
        """Allocate the batch's fields; the reading is a task the driver runs on a read thread (or inline)."""
        fields = {name: np.zeros((len(ids), *shape), dtype) for name, (shape, dtype) in SHAPES.items()}
        return BatchStart(fields, [lambda: self._read(ids, fields)])

    def _read(self, ids: np.ndarray, fields: dict[str, np.ndarray]) -> Failures:
        failures = []
        for position, sample in enumerate(ids.tolist()):
            if sample in self.bad:
                failures.append((position, SampleError(f"arrays-{self.shard_of[sample]}", str(sample), "damaged")))
                continue
            for name, value in expected(sample).items():
                fields[name][position] = value
        return failures

    def without(self, batch: HostBatch, positions: list[int]) -> HostBatch:
        return drop_samples(batch, positions)

    def close(self) -> None:
        pass
