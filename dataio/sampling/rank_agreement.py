"""Ranks that disagree on what they read are refused at a loader's first pass, on every rank.

Every rank computes the epoch's order and its own share from the same few
settings (seed, shuffle, batch size, the position) over the same data; a rank
with another seed (nanoGPT seeds each rank ``1337 + rank``), a stale copy of
the data (one photo fewer) or other mixture weights reads a share cut from
another order, so some samples are read twice and others never, silently.

Matching: a loader is known across ranks by its identity, the kind of loader,
its role (batch size, shuffle, drop_last, train: a validation loader is not a
training one) and where it was built (``construction_site``: the calling lines
outside the loader's constructors, by file name and function, and an ordinal
among the loaders of that role built there), never by what may differ (the
data's fingerprint, the weights: those are compared) nor by the order of first
passes (a loader read on rank 0 alone, a picture for a log, shifted that order,
and a correct job was refused). Ranks whose batch sizes differ are then not
compared here: the epoch digest (``loader.epoch_digest()``) catches what they
read twice or never.

Comparing: at its first pass a loader publishes its settings in the process
group's key-value store under its identity, then waits (up to ``WAIT`` seconds)
for every other rank's and compares them all, so whichever rank differs, every
rank raises ``RanksDisagree`` naming each differing field and each rank's value
(before, one rank raised and the others read on until the launcher ended the
job). No collective is involved: a loader iterated on one rank only waits
``WAIT`` once, then reads, and compares any rank that publishes later at its
next batches (``poll``); a loader built again at that place (a validation
loader made each epoch on rank 0) does not wait again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from collections import Counter
from typing import Any

from dataio.formats.errors import UsageError

log = logging.getLogger("dataio")
WAIT = 5.0  # seconds a first pass waits for the other ranks' settings: ranks in step arrive within milliseconds
POLL = 0.05  # seconds between two looks at ranks that had not published yet (one store round trip each)
SITE_FRAMES = 8  # calling lines that make a loader's site (a helper called from two lines: two sites)
_built: Counter[str] = Counter()  # loaders built in this process, per kind of loader, role and site
_unanswered: set[str] = set()  # sites whose loader no other rank built within the wait: later ones do not wait


class RanksDisagree(UsageError):
    """Two ranks of one job built the same loader with settings, or over data, that give them overlapping
    shares."""


def construction_site(loader: object, role: str = "") -> str:
    """Where ``loader`` is being built: the calling lines outside its own constructors (frames whose ``self``,
    or a wrapper's first argument, is the loader), and an ordinal among loaders of its class built there."""
    frame, lines = sys._getframe(1), []
    while frame is not None and len(lines) < SITE_FRAMES:
        local = frame.f_locals
        args = local.get("args")
        own = local.get("self") is loader or (isinstance(args, tuple) and bool(args) and args[0] is loader)
        if not own:
            # the file's name, not its path: nodes may hold the script or the library under other folders
            lines.append(f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    site = f"{type(loader).__name__}{role}@{'<'.join(lines)}"
    _built[site] += 1
    return f"{site}#{_built[site] - 1}"


class RankAgreement:
    """One loader's agreement with its other ranks: published once per world, compared with every rank."""

    def __init__(self, site: str) -> None:
        self.site = site
        self._pending: list[int] = []  # ranks whose settings were not there yet
        self._seen = 0.0  # when the pending ranks were last looked for
        self._store: Any = None
        self._context: tuple[str, str, dict[str, Any], int] | None = None  # kind, key prefix, mine, rank

    def check(self, kind: str, settings: dict[str, Any], *, world_size: int, rank: int,
              wait: float | None = None) -> None:
        """Publish ``settings`` and compare them with every other rank's, waiting up to ``wait`` (``WAIT``) for
        them. Without an initialised process group of ``world_size`` in which this is ``rank``, nothing is
        checked."""
        self._pending, self._context = [], None
        store = self._store = _store(world_size, rank)
        if store is None:
            return
        identity = hashlib.sha1(f"{kind}/{self.site}".encode()).hexdigest()[:16]
        prefix = f"dataio/agree/{identity}/{world_size}/"
        mine = json.loads(json.dumps(settings, sort_keys=True, default=str))  # as another rank reads it back
        store.set(prefix + str(rank), json.dumps(mine, sort_keys=True))
        self._context = (kind, prefix, mine, rank)
        self._pending = [other for other in range(world_size) if other != rank]
        place = self.site.rsplit("#", 1)[0]  # a validation loader rebuilt each epoch on rank 0 waits once, not each
        deadline = time.monotonic() + (0.0 if place in _unanswered else WAIT if wait is None else wait)
        while True:
            self._compare()
            if not self._pending or time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        if self._pending and place not in _unanswered and wait != 0.0:  # an announcement (wait 0) expects none
            _unanswered.add(place)
            log.info("%s: rank(s) %s did not build this loader within %.0f s (a loader read on some ranks only?); "
                     "compared when they do", kind, self._pending, WAIT if wait is None else wait)

    def poll(self) -> None:
        """Compare the ranks that had not published at the first pass, at most every ``POLL`` seconds."""
        if self._pending and time.monotonic() - self._seen >= POLL:
            self._compare()

    def _compare(self) -> None:
        self._seen = time.monotonic()
        if self._context is None:
            return
        kind, prefix, mine, rank = self._context
        arrived = [other for other in self._pending if self._store.check([prefix + str(other)])]
        self._pending = [other for other in self._pending if other not in arrived]
        for other in arrived:
            theirs = json.loads(self._store.get(prefix + str(other)))
            differ = [k for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)]
            if differ:
                self._pending = []
                raise RanksDisagree(disagreement(kind, differ, mine, theirs, rank, other))


def disagreement(kind: str, differ: list[str], mine: dict, theirs: dict, rank: int, other: int) -> str:
    """One line naming each differing field and its value on both ranks, and the way out."""
    hint = ""
    if "shard" in differ:  # one rank reads the whole set, another a share: the rest follows from it
        differ = ["shard"]
        hint = (" (shard=False reads the whole set on its rank while another rank reads a share, so those samples "
                "are read twice: give every rank the same shard=)")
    what = "; ".join(f"{k} is {mine.get(k)!r} on rank {rank} and {theirs.get(k)!r} on rank {other}" for k in differ)
    if "seed" in differ:
        hint = (" (a per-rank seed such as 1337 + rank gives each rank a share of another order: seed the model "
                "per rank if you like, and every loader with one seed)")
    elif {"dataset", "size"} & set(differ):
        hint = " (a stale or partial copy of the data on some node: give every rank the same data)"
    return (f"{kind.split('/')[0]}: the ranks disagree on what decides their shares: {what}; every rank must "
            f"build the loader with the same values over the same data, else ranks read some samples twice and "
            f"others never{hint}")


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
