"""The driver of a planned conversion: plan, record the plan in OUT, run the items on an engine, merge.

Engine-neutral: ``run`` takes the function that runs the items (``ray_engine.run_on_ray``; the torchrun and
SLURM ranks run one item each through the converters' own rank branch and ``dataio merge``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataio.formats.dataset.manifest import Manifest
from dataio.formats.errors import NothingConverted
from dataio.formats.plan.plan_item import ItemResult
from dataio.formats.plan.plan_kinds import PlannedWork, PlanRequest
from dataio.formats.plan.plan_merge import merge_plan, start_plan
from dataio.formats.plan.plan_table import plan_kind
from dataio.formats.plan.work_plan import staging_root

RunItems = Callable[[PlannedWork, Callable[[str], None]], list[ItemResult]]


@dataclass(frozen=True)
class PlanOutcome:
    """The merged manifest, each item's result, and the local folder holding the merged rejected list."""

    manifest: Manifest
    results: list[ItemResult]
    items: int
    merged_here: Path


def plan_of(kind: str, config: Any, request: PlanRequest) -> PlannedWork:
    """The plan of a ``kind`` conversion ("images", "coco", "text") or index ("index") of ``config``."""
    return plan_kind(kind).plan(config, request)


def run_plan(planned: PlannedWork, run_items: RunItems, *, overwrite: bool = False,
             say: Callable[[str], None] = lambda line: None) -> PlanOutcome:
    """Record the plan in OUT, run its items, merge; NothingConverted if no sample came out."""
    plan = planned.plan
    start_plan(plan, overwrite)
    results = run_items(planned, say)
    mirror = staging_root(plan.staging) / plan.fingerprint[:16] / "merge"
    manifest = merge_plan(plan, mirror)
    if manifest.num_samples == 0:
        raise NothingConverted(f"nothing converted into {plan.out}: every input was rejected or there were none "
                               f"({manifest.num_rejected} rejected)")
    return PlanOutcome(manifest, results, plan.items, mirror if plan.remote else Path(plan.out))

