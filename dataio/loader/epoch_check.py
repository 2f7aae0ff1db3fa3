"""An epoch that proves itself: ``loader.epoch_digest()`` (``dataio.check_epoch(loader)``) after a pass.

During a pass the loader adds each batch it hands out to a digest of the sample
ids it read (``sampling.epoch_digest``: padding repeats left out; a few us a
batch). After it, ``epoch_digest()`` gathers every rank's digest (one small
all-gather) and compares their sum with the digest of the planned pass: every
rank's plan, computed with the same partition functions as the reading. Any
sample read twice or never, or a mixture's share off its plan, raises
``EpochMismatch`` on every rank, naming the samples and the ranks (a second
gather, of the ids, only then). A resumed pass is checked against the plan
restricted to what remained at the resume (the positions read before it were
checked, or not, by the pass that read them): the digest covers one pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataio.formats.errors import DataioError
from dataio.pipeline.host_batch import HostBatch
from dataio.pipeline.pass_plan import PassPlan
from dataio.sampling import epoch_digest
from dataio.sampling.epoch_digest import Digest


class EpochMismatch(DataioError):
    """A pass read some sample twice or never, or a mixture's share off its plan (exit 1 in the CLI)."""


class EpochDigesting:
    """Mixed into ``SourceLoader``: the digest of the pass being read, and its check against the plan."""

    position: Any
    world_size: int
    rank: int
    stats: Any
    _explicit_world: bool
    _plan_cache: Any
    _digest_pass: tuple[int, int, PassPlan] | None = None  # epoch, consumed at its start, this rank's plan
    _digest_read: Digest = Digest()
    _digest_ids: list[np.ndarray] = []  # the ids this rank handed out, to name them after a mismatch (8 B a sample)
    _make_plan: Any
    _describe: Any

    def _sources_of(self, ids: np.ndarray) -> tuple[np.ndarray, int] | None:
        """Each id's source index and the count of sources (a mixture), or None."""
        return None

    def _digest_begin(self, plan: PassPlan, consumed: int) -> None:
        self._digest_pass, self._digest_read, self._digest_ids = (self.position.epoch, consumed, plan), Digest(), []

    def _digest_batch(self, host: HostBatch) -> None:
        """Add a batch handed out (its samples that are not padding repeats) to the pass's digest."""
        ids = host.samples[~host.repeated] if host.repeated.any() else host.samples
        self._digest_ids.append(np.array(ids, copy=True))  # a batch buffer may be reused
        self._digest_read = self._digest_read + self._digest_of(ids)

    def planned_digest(self) -> tuple[Digest, list[np.ndarray]]:
        """The last pass's planned digest over every rank, and each rank's planned ids (repeats left out)."""
        if self._digest_pass is None:
            raise EpochMismatch(f"{self._describe()}: no pass was read yet: epoch_digest() checks the last pass")
        epoch, consumed, _ = self._digest_pass
        p = self.position
        kept = (p.epoch, p.consumed, self.rank, self._explicit_world, self._plan_cache)
        p.epoch, p.consumed, self._explicit_world = epoch, consumed, True  # the pass's world, not followed now
        try:
            ids = []
            for rank in range(self.world_size):
                self.rank = rank
                plan = self._make_plan()
                ids.append(plan.ids[~plan.repeated])
        finally:
            p.epoch, p.consumed, self.rank, self._explicit_world, self._plan_cache = kept
        return epoch_digest.total([self._digest_of(i) for i in ids]), ids

    def _digest_of(self, ids: np.ndarray) -> Digest:
        sources = self._sources_of(ids)
        return epoch_digest.digest_of(ids) if sources is None else epoch_digest.digest_of(ids, *sources)

    def epoch_digest(self) -> dict[str, Any]:
        """Check the last pass against its plan, on every rank at once (a collective: call it on every rank).

        Returns the digest (samples, sum, xor, per-source counts, ranks); raises ``EpochMismatch`` naming what
        was read twice or never, or the sources off their shares."""
        planned, planned_ids = self.planned_digest()
        gathered = _gather_ints(self._digest_read.as_ints(), self.world_size, self.rank)
        read = epoch_digest.total([Digest.from_ints(v) for v in gathered]) if gathered else self._digest_read
        if gathered is None and self.world_size > 1:  # an explicit world without a process group: this rank alone
            planned = self._digest_of(planned_ids[self.rank])
        result = {**read.as_dict(), "ranks": self.world_size, "planned": planned.as_dict()}
        if read == planned:
            return {**result, "ok": True}
        raise EpochMismatch(self._mismatch(read, planned, planned_ids, gathered is not None))

    def _mismatch(self, read: Digest, planned: Digest, planned_ids: list[np.ndarray], together: bool) -> str:
        mine = np.concatenate(self._digest_ids).tolist() if self._digest_ids else []  # what was read, not planned
        if together:
            read_ids = _gather_objects(mine, self.world_size)
            wanted = [ids.tolist() for ids in planned_ids]
        else:
            read_ids, wanted = [mine], [planned_ids[self.rank if self.world_size > 1 else 0].tolist()]
        found = epoch_digest.differences(read_ids, wanted)
        if read.sources != planned.sources:
            found.append("samples per source " + ", ".join(
                f"{name}: {got} read, {want} planned"
                for name, got, want in zip(self._source_names(), read.sources, planned.sources, strict=True)
                if got != want))
        dropped = len(self.stats.errors)
        why = f" ({dropped} sample(s) dropped by the error policy)" if dropped else ""
        epoch, consumed, _ = self._digest_pass  # type: ignore[misc]
        return (f"{self._describe()}: the pass of epoch {epoch} (from position {consumed}) is not its plan: "
                f"{read.count} samples read of {planned.count} planned{why}; " + "; ".join(found or ["ids differ"]))

    def _source_names(self) -> list[str]:
        return []


def _world(world_size: int, rank: int) -> Any:
    """``torch.distributed`` when its default group is this world; else None."""
    if world_size < 2:
        return None
    import torch.distributed as dist  # lazy: most loops never run distributed

    if dist.is_available() and dist.is_initialized() and (dist.get_world_size(), dist.get_rank()) == (world_size,
                                                                                                      rank):
        return dist
    return None


def _gather_ints(values: list[int], world_size: int, rank: int) -> list[list[int]] | None:
    """Every rank's ``values`` (one all-gather of a small int64 tensor), or None without a process group."""
    dist = _world(world_size, rank)
    if dist is None:
        return None
    import torch  # lazy, as above

    mine = torch.tensor(values, dtype=torch.int64)
    out = [torch.zeros_like(mine) for _ in range(world_size)]
    dist.all_gather(out, mine)
    return [t.tolist() for t in out]


def _gather_objects(value: Any, world_size: int) -> list[Any]:
    import torch.distributed as dist  # lazy: only after a mismatch, in a process group

    out: list[Any] = [None] * world_size
    dist.all_gather_object(out, value)
    return out
