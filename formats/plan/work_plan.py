"""A conversion as a plan: deterministic items, each a contiguous piece of the input, and one merge.

Item k of K writes a dataset of its own (shards, sample table, journal, manifest) into
``OUT/rank-0000k-of-0000K/``, the name ``dataio merge`` and the torchrun/SLURM ranks use, so a rerun of an
item resumes or skips it (its manifest is written last) and never duplicates it. ``OUT/plan.json`` holds the
plan's fingerprint (options, item count and the input's listing): a rerun with other options or another
input is refused instead of merging parts of two plans. The plan is what an engine ships to its workers:
small, picklable, holding no open file (the pieces travel apart, one per item).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dataio.formats.ranks.rank_split import rank_folder

PLAN_NAME = "plan.json"
KINDS = ("images", "coco", "text", "index")


@dataclass(frozen=True, kw_only=True)
class WorkPlan:
    """What every item of one conversion shares."""

    kind: str  # which converter packs an item: "images", "coco", "text", "index"
    config: Any  # the converter's config; its out is the final OUT for a local one
    out: str  # OUT: a local folder, or a URL (items stage their part on their node, then upload it)
    items: int
    fingerprint: str
    storage_options: dict | None = None
    carried: dict[str, bytes] = field(default_factory=dict)  # small driver files items need (a tokenizer)
    cpus_per_item: int = 1  # the converter's worker processes in an item
    staging: str | None = None  # where items stage a URL OUT's parts (default: each node's own cache)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.items < 1 or self.cpus_per_item < 1:
            raise ValueError(f"items and cpus_per_item must be >= 1, got {self.items}, {self.cpus_per_item}")

    @property
    def remote(self) -> bool:
        return "://" in self.out and not self.out.startswith("file://")

    def item_name(self, item: int) -> str:
        """Item ``item``'s part folder in OUT."""
        return rank_folder(item, self.items)

    def record(self) -> bytes:
        """``plan.json``: what a rerun compares with before reusing any part."""
        return (json.dumps({"kind": self.kind, "items": self.items, "fingerprint": self.fingerprint},
                           sort_keys=True) + "\n").encode()


def staging_root(staging: str | None) -> Path:
    """Where items stage a URL OUT's parts and the driver trains a text tokenizer: the given folder, or each
    node's own cache."""
    return Path(staging) if staging else Path.home() / ".cache" / "dataio" / "staging"


def plan_fingerprint(kind: str, config: Any, items: int, sizes: np.ndarray, names: list[str]) -> str:
    """A stable hash of the options, the item count and the input's listing (names and sizes)."""
    digest = hashlib.sha256()
    digest.update(json.dumps([kind, items, _stable(config)], sort_keys=True, default=str).encode())
    digest.update(np.ascontiguousarray(sizes, dtype=np.int64).tobytes())
    for name in names:
        digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
    return digest.hexdigest()


def _stable(value: Any) -> Any:
    """``value`` as JSON-able data that is the same in every run: objects without a stable form (a user's
    tokenizer object, whose repr holds an address) by type name; where OUT goes is not part of the plan."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _stable(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name not in ("out", "progress", "num_workers", "rank", "world_size", "overwrite")}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_stable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _stable(v) for k, v in value.items()}
    return type(value).__name__
