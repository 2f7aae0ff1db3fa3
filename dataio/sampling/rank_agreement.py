"""Ranks that disagree on what decides their shares are refused at a loader's first pass.

Every rank computes the epoch's order and its own share from the same few
settings (seed, shuffle, batch size, the position); a rank with another seed
(nanoGPT seeds each rank ``1337 + rank``) reads a share cut from another
order, so some samples are read twice and others never, silently. At its first
pass a loader publishes those settings in the process group's key-value store
and compares them with its two neighbours' (ring order). It never waits: the
later of two neighbours to publish sees the other's entry, so whenever two
ranks differ some rank raises, and the launcher (torchrun, Lightning) stops
the others. No collective is involved, so a loader iterated on one rank only
(a rank-0 evaluation) cannot hang here.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from dataio.formats.errors import UsageError

_begun: Counter[str] = Counter()  # first passes begun in this process, per loader kind and data set


class RanksDisagree(UsageError):
    """Two ranks of one job built the same loader with settings that give them overlapping shares."""


def check_ranks_agree(kind: str, settings: dict[str, Any], *, world_size: int, rank: int) -> None:
    """Refuse a first pass whose share-deciding ``settings`` differ from a neighbouring rank's.

    ``kind`` names the loader (its type and mode); ``settings["dataset"]`` the data set's fingerprint. Loaders
    of one kind over one data set are matched across ranks by the order in which their first passes begin.
    Without an initialised process group of ``world_size`` in which this is ``rank``, nothing is checked.
    """
    store = _store(world_size, rank)
    if store is None:
        return
    name = f"{kind}/{settings.get('dataset', '')}"
    prefix = f"dataio/agree/{name}/{_begun[name]}/"
    _begun[name] += 1
    mine = json.loads(json.dumps(settings, sort_keys=True, default=str))  # as a neighbour reads it back
    store.set(prefix + str(rank), json.dumps(mine, sort_keys=True))
    for other in sorted({(rank - 1) % world_size, (rank + 1) % world_size} - {rank}):
        key = prefix + str(other)
        if not store.check([key]):  # not there yet: that rank compares when it publishes
            continue
        theirs = json.loads(store.get(key))
        differ = [k for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)]
        if differ:
            raise RanksDisagree(_message(kind, differ, mine, theirs, rank, other))


def _message(kind: str, differ: list[str], mine: dict, theirs: dict, rank: int, other: int) -> str:
    what = "; ".join(f"{k} is {mine.get(k)!r} on rank {rank} and {theirs.get(k)!r} on rank {other}" for k in differ)
    hint = ""
    if "seed" in differ:
        hint = (" (a per-rank seed such as 1337 + rank gives each rank a share of another order: seed the model "
                "per rank if you like, and every loader with one seed)")
    return (f"{kind.split('/')[0]}: the ranks disagree on what decides their shares: {what}; every rank must "
            f"build the loader with the same values, else ranks read some samples twice and others never{hint}")


def _store(world_size: int, rank: int) -> Any:
    """The default process group's store, when that group is this loader's world; else None."""
    if world_size < 2:
        return None
    import torch.distributed as dist  # lazy: most loaders never run distributed

    if not (dist.is_available() and dist.is_initialized()):
        return None
    if (dist.get_world_size(), dist.get_rank()) != (world_size, rank):
        return None  # an explicit world inside a larger job: its ranks are not the group's
    try:  # lazy, as above; private but stable since torch 1.x: the store init_process_group made
        from torch.distributed.distributed_c10d import _get_default_store
        return _get_default_store()
    except (ImportError, ValueError, RuntimeError):  # a backend without a store: nothing to compare through
        return None
