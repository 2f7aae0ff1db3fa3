"""The driver of a planned conversion: plan, record the plan in OUT, run the items on an engine, merge.

Engine-neutral: ``run`` takes the function that runs the items (``ray_engine.run_on_ray``; the torchrun and
SLURM ranks run one item each through the converters' own rank branch and ``dataio merge``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataio.formats.dataset.manifest import Manifest
from dataio.formats.errors import NothingConverted
from dataio.formats.plan.index_plan import plan_index
from dataio.formats.plan.plan_item import ItemResult, default_staging
from dataio.formats.plan.plan_kinds import PlannedWork, PlanRequest, file_bytes, plan_coco, plan_images, plan_text
from dataio.formats.remote.source_files import RemoteRoot
from dataio.formats.text.text_sources import expand_sources
from dataio.formats.plan.plan_merge import merge_plan, start_plan

PLANNERS = {"images": plan_images, "coco": plan_coco, "index": plan_index}  # text: also where it trains a tokenizer
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
    if kind in PLANNERS:
        return PLANNERS[kind](config, request)
    staging = Path(request.staging) if request.staging else default_staging()
    return plan_text(config, request, staging / f"tokenizer-{_text_key(config, request.out)}")


def run_plan(planned: PlannedWork, run_items: RunItems, *, overwrite: bool = False,
             say: Callable[[str], None] = lambda line: None) -> PlanOutcome:
    """Record the plan in OUT, run its items, merge; NothingConverted if no sample came out."""
    plan = planned.plan
    start_plan(plan, overwrite)
    results = run_items(planned, say)
    staging = Path(plan.staging) if plan.staging else default_staging()
    mirror = staging / plan.fingerprint[:16] / "merge"
    manifest = merge_plan(plan, mirror)
    if manifest.num_samples == 0:
        raise NothingConverted(f"nothing converted into {plan.out}: every input was rejected or there were none "
                               f"({manifest.num_rejected} rejected)")
    return PlanOutcome(manifest, results, plan.items, mirror if plan.remote else Path(plan.out))


def _text_key(config: Any, out: str) -> str:
    """Where the driver trains a text conversion's tokenizer: one folder per OUT, sources and training options."""
    files = [(str(p), file_bytes(p), 0 if isinstance(p, RemoteRoot) else Path(p).stat().st_mtime_ns)
             for p in expand_sources(list(config.sources))]
    tokenizer = config.tokenizer
    key = [out, files, tokenizer.vocab_size, tokenizer.bos, tokenizer.eos, tokenizer.pad, config.doc_sep, config.field]
    return hashlib.sha256(json.dumps(key, default=str).encode()).hexdigest()[:16]


