"""One item of a plan, run on whatever node an engine picked: idempotent, so retries are safe.

A local OUT (a folder every node shares): the item packs into ``OUT/<item>/`` directly, resuming its own
journal if an attempt before it was killed. A URL OUT: the item packs into a staging folder on its node
(``<staging>/<plan fingerprint>/<item>``: a retry on the same node resumes there) and uploads the part,
its manifest last. Either way an item whose part already has its manifest is skipped, so a driver that
died and runs again redoes only the unfinished items, and a part is never written twice side by side:
a rerun replaces it with the same bytes, and its rejected inputs stay listed once.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dataio.formats.dataset.remote_output import upload_dataset
from dataio.formats.dataset.manifest import MANIFEST_NAME, parse_manifest, read_manifest
from dataio.formats.files import refuse_link
from dataio.formats.limits import MAX_STATE_FILE_BYTES
from dataio.formats.remote.storage import RetryPolicy, open_location
from dataio.formats.plan.plan_kinds import item_config
from dataio.formats.plan.plan_table import plan_kind
from dataio.formats.plan.work_plan import WorkPlan, staging_root


@dataclass(frozen=True)
class ItemResult:
    """What an item did: its samples and rejected inputs, whether it was already done, and where it ran."""

    item: int
    samples: int
    rejected: int
    skipped: bool
    node: str
    seconds: float = 0.0  # how long the attempt that returned this ran on its node (progress and benchmarks)


def run_item(plan: WorkPlan, shared: Any, piece: Any, item: int) -> ItemResult:
    """Pack item ``item`` (``piece``) of ``plan`` into its part, unless its part is complete already."""
    start = time.monotonic()
    result = _run_item(plan, shared, piece, item)
    return replace(result, seconds=round(time.monotonic() - start, 3))


def _run_item(plan: WorkPlan, shared: Any, piece: Any, item: int) -> ItemResult:
    name = plan.item_name(item)
    node = socket.gethostname() + f":{os.getpid()}"
    work = staging_root(plan.staging) / plan.fingerprint[:16]
    kind = plan_kind(plan.kind)
    if kind.in_place is not None:  # written into the input's folder (an index's tars): no part folder
        config = item_config(plan, work)
        done = kind.in_place.item_done(config, shared, piece)
        samples, rejected = kind.pack(config, shared, piece, Path(plan.out))
        return ItemResult(item, samples, rejected, done, node)
    if not plan.remote:
        part = Path(plan.out) / name
        refuse_link(part, "a part of the plan")
        if (part / MANIFEST_NAME).is_file():
            return _done(item, read_manifest(part)[1], node)
        samples, rejected = kind.pack(item_config(plan, work), shared, piece, part)
        return ItemResult(item, samples, rejected, False, node)
    location = open_location(f"{plan.out.rstrip('/')}/{name}", plan.storage_options)
    existing = _remote_manifest(location)
    if existing is not None:
        return _done(item, existing, node)
    part = work / name
    for folder in (work, part):  # staged in a shared scratch folder: packed and uploaded, never a link's folder
        refuse_link(folder, "a staged part of the plan")
    if (part / MANIFEST_NAME).is_file():  # packed here by an attempt lost while uploading: upload it again
        staged = read_manifest(part)[1]
        samples, rejected = staged.num_samples, staged.num_rejected
    else:
        samples, rejected = kind.pack(item_config(plan, work), shared, piece, part)
    upload_dataset(part, location, RetryPolicy())
    return ItemResult(item, samples, rejected, False, node)


def _remote_manifest(location: Any) -> Any:
    """The part's manifest if it was uploaded (it is uploaded last), else None."""
    try:
        if not location.fs.exists(location.path(MANIFEST_NAME)):
            return None
    except FileNotFoundError:
        return None
    text = location.read_bytes(MANIFEST_NAME, limit=MAX_STATE_FILE_BYTES).decode("utf-8")
    return parse_manifest(text, location.display(MANIFEST_NAME))


def _done(item: int, manifest: Any, node: str) -> ItemResult:
    return ItemResult(item, manifest.num_samples, manifest.num_rejected, True, node)

