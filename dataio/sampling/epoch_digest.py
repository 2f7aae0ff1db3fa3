"""An epoch's digest: what a pass read, in a few integers that add up across ranks (pure functions, no processes).

Each sample id is hashed to 64 bits (splitmix64: neighbouring ids give unrelated
hashes, so a swap of two ids never cancels out); a set of reads is then its
count, the sum of its hashes mod 2**64 and their xor, and the count per source
of a mixture. The digests of the ranks add up (``+``) to the digest of what the
job read, compared with the digest of the planned epoch (the plans of every rank,
computed with the same partition functions). A sample read twice changes the
count and the sum; one read in place of another changes the sum and the xor;
a share of a mixture off its plan changes the per-source counts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

MASK = (1 << 64) - 1
_LOW = (1 << 32) - 1


def hashed(ids: np.ndarray) -> np.ndarray:
    """splitmix64 of each id: uint64 ``(N,)`` (numpy's uint64 arithmetic wraps mod 2**64, as the hash wants)."""
    z = np.asarray(ids, dtype=np.int64).astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@dataclass(frozen=True, kw_only=True)
class Digest:
    """A set of reads: ``count`` ids, their hashes' ``total`` (mod 2**64) and ``xor``, the ids per source."""

    count: int = 0
    total: int = 0
    xor: int = 0
    sources: tuple[int, ...] = ()

    def __add__(self, other: "Digest") -> "Digest":
        width = max(len(self.sources), len(other.sources))
        mine, theirs = (s.sources + (0,) * (width - len(s.sources)) for s in (self, other))
        return Digest(count=self.count + other.count, total=(self.total + other.total) & MASK,
                      xor=self.xor ^ other.xor, sources=tuple(a + b for a, b in zip(mine, theirs, strict=True)))

    def as_ints(self) -> list[int]:
        """The digest as non-negative ints below 2**32 (64-bit values split: an int64 tensor carries them)."""
        return [self.count, self.total & _LOW, self.total >> 32, self.xor & _LOW, self.xor >> 32, *self.sources]

    @classmethod
    def from_ints(cls, values: list[int]) -> "Digest":
        count, total_low, total_high, xor_low, xor_high, *sources = (int(v) for v in values)
        return cls(count=count, total=total_low | total_high << 32, xor=xor_low | xor_high << 32,
                   sources=tuple(sources))

    def as_dict(self) -> dict[str, object]:
        """JSON-safe (log.json): the 64-bit values in hex."""
        out: dict[str, object] = {"samples": self.count, "sum": f"{self.total:016x}", "xor": f"{self.xor:016x}"}
        if self.sources:
            out["sources"] = list(self.sources)
        return out


def digest_of(ids: np.ndarray, sources: np.ndarray | None = None, num_sources: int = 0) -> Digest:
    """The digest of reading ``ids`` once each (``sources``: each id's source index, for a mixture)."""
    h = hashed(ids)
    counts = tuple(np.bincount(sources, minlength=num_sources).tolist()) if sources is not None else ()
    return Digest(count=len(h), total=int(h.sum(dtype=np.uint64)) if len(h) else 0,
                  xor=int(np.bitwise_xor.reduce(h)) if len(h) else 0, sources=counts)


def total(digests: list[Digest]) -> Digest:
    """The digests added up (the job's, from its ranks')."""
    out = Digest()
    for digest in digests:
        out = out + digest
    return out


def differences(read: list[list[int]], planned: list[list[int]], limit: int = 5) -> list[str]:
    """Which ids were read twice or more, or never, and by which ranks: ``read[r]`` / ``planned[r]``: rank r's ids
    (the second look, once the digests differ)."""
    readers: dict[int, list[int]] = {}
    for rank, ids in enumerate(read):
        for i in ids:
            readers.setdefault(i, []).append(rank)
    planned_on = {i: rank for rank, ids in enumerate(planned) for i in ids}
    want = Counter(i for ids in planned for i in ids)
    lines = []
    for i in sorted(set(readers) | set(want)):
        got, ranks = len(readers.get(i, ())), ", ".join(map(str, readers.get(i, ())))
        if got == want[i]:
            continue
        if not want[i]:
            lines.append(f"sample {i} read by rank(s) {ranks} but not in the plan")
        elif not got:
            lines.append(f"sample {i} never read (planned on rank {planned_on[i]})")
        else:
            lines.append(f"sample {i} read {got} time(s) (ranks {ranks}), planned {want[i]}")
        if len(lines) == limit:
            break
    return lines
