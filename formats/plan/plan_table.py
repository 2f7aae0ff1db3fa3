"""The kinds of plan, declared once: each names how it is planned, packed, merged and summed up
(``plan_kinds.PlanKind``). The driver, the items and the merge look a kind up here; none tests its name."""

from __future__ import annotations

from dataio.formats.errors import UsageError
from dataio.formats.plan.index_plan import INDEX
from dataio.formats.plan.plan_kinds import COCO, IMAGES, TEXT, PlanKind

PLAN_KINDS: dict[str, PlanKind] = {"images": IMAGES, "coco": COCO, "text": TEXT, "index": INDEX}


def plan_kind(name: str) -> PlanKind:
    """The plan kind ``name`` ("images", "coco", "text", "index")."""
    try:
        return PLAN_KINDS[name]
    except KeyError:
        raise UsageError(f"no plan kind {name!r}: one of {sorted(PLAN_KINDS)}") from None
