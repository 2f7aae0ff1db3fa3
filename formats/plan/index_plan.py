"""``dataio index`` as a plan: items are contiguous groups of the tars, balanced by bytes; the merge is the index.

An index adopts the tars in place, so an item has no part folder of its own: it journals each of its tars
(``wds_index.journal_tars``: one journal file a tar, ``.index-journal/TAR.json`` beside the tars), and it is
done when every one of its tars is journaled and unchanged since. A rerun of an item therefore skips it or
redoes only its tars not yet journaled, and a tar's rejected members are in its one journal file, listed once
however often its item ran. The merge is ``index_shards`` itself: it finds every tar journaled (any that is
not, it indexes) and writes the DALI indexes, the sample table, ``rejected.jsonl`` and, last, the manifest,
numbering the labels over all the tars as one process does, so the result is the one-process index. The
plan's record lives in the journal folder (``.index-journal/plan.json``): ``index_shards`` removes it with
the journal when the index is written, so the folder ends as a one-process index leaves it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from dataio.formats.dataset.manifest import Manifest, read_manifest
from dataio.formats.errors import UsageError
from dataio.formats.file_gate import read_input
from dataio.formats.files import refuse_link, write_atomic
from dataio.formats.images.packing_kind import index_kind
from dataio.formats.images.wds_index import (JOURNAL_DIR, IndexConfig, IndexSummary, held_kind, index_shards,
                                             indexed_folder, journal_tars, saved_result)
from dataio.formats.limits import MAX_STATE_FILE_BYTES
from dataio.formats.plan.plan_kinds import InPlace, PlanKind, PlannedWork, PlanRequest
from dataio.formats.plan.plan_sizing import choose_items
from dataio.formats.plan.work_plan import PLAN_NAME, WorkPlan, plan_fingerprint
from dataio.formats.ranks.rank_split import rank_bounds


def plan_index(config: IndexConfig, request: PlanRequest) -> PlannedWork:
    """The tars (``tar_files``) cut into items of contiguous tars by bytes; each piece holds its tars' absolute
    paths (a node's working folder is not the driver's), ``shared`` the kind the tars hold (told once here from
    all of them, as one process tells it). OUT is the tars' folder (``request.out`` is not used)."""
    folder, tars = indexed_folder(config)  # a folder indexed already is refused before any item runs
    kind = config.kind or held_kind(tars, config.num_workers)
    index_kind(kind).start(config)  # a bad tokenizer file is named before the cluster works
    sizes = np.array([tar.stat().st_size for tar in tars], dtype=np.int64)
    items = choose_items(int(sizes.sum()), len(tars), request.cluster_cpus, request.items)
    bounds = rank_bounds(sizes, items)
    names = [tar.name for tar in tars]
    plan = WorkPlan(kind="index", config=config, out=str(folder), items=items,
                    fingerprint=plan_fingerprint("index", config, items, sizes, names),
                    cpus_per_item=request.cpus_per_item)
    pieces = [tuple(str(folder / name) for name in names[int(bounds[k]):int(bounds[k + 1])]) for k in range(items)]
    return PlannedWork(plan, kind, pieces, [len(piece) for piece in pieces])


def index_item_done(config: IndexConfig, shared: Any, piece: tuple[str, ...]) -> bool:
    """Whether every tar of the item's ``piece`` is journaled and unchanged since: the item has nothing to do."""
    kind = index_kind(shared)
    return all(saved_result(Path(tar).parent, Path(tar), kind, config) is not None for tar in piece)


def _pack_index(config: Any, shared: Any, piece: Any, out: Path) -> tuple[int, int]:
    """Journal the item's tars in the tars' folder ``out``; (keys kept so far, lines rejected so far): the merge
    may still reject a label outside a classes file."""
    results = journal_tars(out, [Path(tar) for tar in piece], index_kind(shared), config)
    return sum(len(r["rows"]) for r in results), sum(len(r["rejected"]) for r in results)


def index_record(plan: WorkPlan) -> Path:
    """Where an index plan's record lies: in the journal folder, removed with it once the index is written."""
    return Path(plan.out) / JOURNAL_DIR / PLAN_NAME


def start_index_plan(plan: WorkPlan, overwrite: bool) -> None:
    """Record the plan in the tars' journal folder, or check the record there: the journal of another plan
    (other options, tars or item count) is refused, or with ``overwrite`` its record replaced (the tars'
    journals stay: each is kept only while its tar and how it is read are unchanged)."""
    record = index_record(plan)
    refuse_link(record.parent, "its index journal")  # the merge removes the journal's *.json: never a link's
    if record.is_file() and not overwrite and read_input(record, MAX_STATE_FILE_BYTES) != plan.record():
        changed = _changed_tar(Path(plan.out))
        if changed:  # the same command cannot finish the old plan: say which tar moved under it
            raise UsageError(f"{record}: {changed}; pass --overwrite to index the tars as they are now (the "
                             "journals of unchanged tars are kept)")
        raise UsageError(f"{record}: the tars are being indexed by another plan (other options, tars or --items); "
                         "give the same command again to finish it, or pass --overwrite to index with this one")
    record.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(record, plan.record())


def _changed_tar(folder: Path) -> str:
    """The first journaled tar that is gone or whose size changed since its journal was written, said; "" if none."""
    for journal in sorted((folder / JOURNAL_DIR).glob("*.tar.json")):
        try:
            size = json.loads(read_input(journal, MAX_STATE_FILE_BYTES))["stamp"][0]
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            continue
        tar = folder / journal.name[:-len(".json")]
        if not tar.is_file():
            return f"{tar.name} is gone since a run before journaled it"
        if tar.stat().st_size != size:
            return f"{tar.name} changed since a run before journaled it ({size:,} bytes, now {tar.stat().st_size:,})"
    return ""


def merge_index(plan: WorkPlan) -> Manifest:
    """The plan's one merge: ``index_shards`` over the journaled tars; the manifest it wrote."""
    index_shards(plan.config)
    return read_manifest(Path(plan.out))[1]


def index_summary(manifest: Manifest, planned: PlannedWork, out: str, source: str) -> str:
    """The one-process index's line and where it ran (its rejected members are listed in the file only)."""
    summary = IndexSummary(manifest.num_samples, manifest.num_rejected, len(manifest.shards), Path(out),
                           index_kind(planned.shared).what)
    return f"{summary.line()} {source}"


INDEX = PlanKind(plan_index, _pack_index, summary=index_summary, says_rejected=False,
                 in_place=InPlace(start=start_index_plan, item_done=index_item_done, merge=merge_index))
