"""Each converter as a plan: its listing cut into items (``rank_split``), and how one item is packed.

The driver lists the input once (a folder walk, a COCO JSON, text files cut at document ends) and sends
each item only its piece; what every item reads whole (a COCO index) is ``shared``, sent once. Files the
driver holds and the nodes may not (a tokenizer file, one trained here) travel in ``carried`` and are
written on the node before the item runs. ``dataio index`` is planned by ``index_plan``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from collections.abc import Callable

import numpy as np

from dataio.formats.dataset.manifest import Manifest
from dataio.formats.coco.coco_convert import coco_listing, coco_origin, coco_piece, coco_sizes, pack_coco_piece
from dataio.formats.file_gate import read_input
from dataio.formats.files import write_atomic
from dataio.formats.images.image_convert import pack_image_piece
from dataio.formats.images.image_inputs import image_listing
from dataio.formats.limits import MAX_STATE_FILE_BYTES
from dataio.formats.plan.plan_sizing import choose_items
from dataio.formats.plan.work_plan import WorkPlan, plan_fingerprint, staging_root
from dataio.formats.ranks.rank_split import rank_bounds
from dataio.formats.remote.source_files import RemoteRoot
from dataio.formats.text.text_convert import pack_text_piece, text_piece, train_shared_tokenizer
from dataio.formats.text.text_sources import expand_sources, text_pieces
from dataio.formats.text.tokenizer_setup import TokenizerConfig

CARRIED_TOKENIZER = "tokenizer.json"


@dataclass(frozen=True, kw_only=True)
class PlanRequest:
    """How the user asked for the plan: OUT, the item count (None: by bytes and CPUs), the cluster's CPUs."""

    out: str
    items: int | None = None
    cluster_cpus: int = 1
    cpus_per_item: int = 1
    storage_options: dict | None = None
    staging: str | None = None


@dataclass(frozen=True)
class PlannedWork:
    """A plan, what all its items share, and each item's piece and unit count (for progress)."""

    plan: WorkPlan
    shared: Any
    pieces: list[Any]
    units: list[int]


def conversion_summary(manifest: Manifest, planned: PlannedWork, out: str, source: str) -> str:
    """A conversion's closing line; ``source``: where its items ran ("from 4 items on Ray (1 already done)")."""
    return (f"packed {manifest.num_samples} samples into {len(manifest.shards)} shards in {out} {source}, "
            f"{manifest.num_rejected} rejected")


@dataclass(frozen=True)
class InPlace:
    """A plan whose items write beside the input (``dataio index``'s tars), not into part folders of OUT: how it
    records the plan, tells an item done, and merges."""

    start: Callable[[WorkPlan, bool], None]
    item_done: Callable[[Any, Any, Any], bool]
    merge: Callable[[WorkPlan], Manifest]


@dataclass(frozen=True)
class PlanKind:
    """One kind of plan, declared once (``plan_table``): how the driver plans it, how a node packs one piece
    into a folder ((samples, rejected)), and the driver's closing line (manifest, plan, OUT, where it ran)."""

    plan: Callable[[Any, PlanRequest], PlannedWork]
    pack: Callable[[Any, Any, Any, Path], tuple[int, int]]
    summary: Callable[[Manifest, PlannedWork, str, str], str] = conversion_summary
    says_rejected: bool = True  # the driver lists each rejected input on stderr (an index: in its file only)
    in_place: InPlace | None = None


def _cut(kind: str, config: Any, request: PlanRequest, sizes: np.ndarray, names: list[str], pieces_of,
         shared: Any = None, carried: dict[str, bytes] | None = None, items: int | None = None) -> PlannedWork:
    items = items or choose_items(int(sizes.sum()), len(sizes), request.cluster_cpus, request.items)
    bounds = rank_bounds(sizes, items)
    plan = WorkPlan(kind=kind, config=config, out=request.out, items=items,
                    fingerprint=plan_fingerprint(kind, config, items, sizes, names),
                    storage_options=request.storage_options, carried=carried or {},
                    cpus_per_item=request.cpus_per_item, staging=request.staging)
    pieces = [pieces_of(int(bounds[k]), int(bounds[k + 1]), k) for k in range(items)]
    return PlannedWork(plan, shared, pieces, [int(bounds[k + 1] - bounds[k]) for k in range(items)])


def _carried_tokenizer(tokenizer: Any) -> dict[str, bytes]:
    if tokenizer is None or getattr(tokenizer, "path", None) is None:
        return {}
    return {CARRIED_TOKENIZER: read_input(Path(tokenizer.path), MAX_STATE_FILE_BYTES)}


def plan_images(config: Any, request: PlanRequest) -> PlannedWork:
    """``convert images`` (classification, pairs, views; folders or Parquet) as items of contiguous inputs."""
    inputs, sizes = image_listing(config)
    names = [identity for identity, _ in inputs.files]
    return _cut("images", config, request, sizes, names,
                lambda start, stop, k: inputs.part(start, stop, with_rejected=k == 0),
                carried=_carried_tokenizer(config.tokenizer))


def plan_coco(config: Any, request: PlanRequest) -> PlannedWork:
    """``convert coco`` as items of contiguous images; the index (categories, annotations) is shared."""
    index, images, empty = coco_listing(config)
    index = replace(index, origin=coco_origin(config, index))  # the nodes need not see the JSON file
    sizes = coco_sizes(config, index, images)
    return _cut("coco", config, request, sizes, [image.file_name for image in images],
                lambda start, stop, k: coco_piece(config, index, images, empty, start, stop, k), shared=index)


def plan_text(config: Any, request: PlanRequest) -> PlannedWork:
    """``convert text`` as items of contiguous pieces of the files (cut at document ends), with one tokenizer:
    the given file, or one trained here on every file (as a one-process run trains it), in a staging folder
    of its own (``_tokenizer_folder``)."""
    files = expand_sources(list(config.sources))  # listed once: a URL prefix is not walked twice
    sized = [(path, file_bytes(path)) for path in files]
    total = sum(size for _, size in sized)
    items = choose_items(total, 2**31, request.cluster_cpus, request.items)
    pieces, sizes = text_pieces(files, items, doc_sep=config.doc_sep, field_name=config.field)
    items = min(items, len(pieces))
    tokenizer = config.tokenizer
    if tokenizer.path is None:
        folder = staging_root(request.staging) / f"tokenizer-{_tokenizer_key(config, request.out, sized)}"
        tokenizer = replace(tokenizer, path=train_shared_tokenizer(config, files, folder), train=None)
    config = replace(config, tokenizer=tokenizer)
    names = [f"{piece.path}#{piece.start}-{piece.stop}" for piece in pieces]
    return _cut("text", config, request, np.array(sizes, dtype=np.int64), names,
                lambda start, stop, k: text_piece(pieces, start, stop),
                carried=_carried_tokenizer(tokenizer), items=items)


def _tokenizer_key(config: Any, out: str, sized: list[tuple[Any, int]]) -> str:
    """The driver's tokenizer folder's name: one per OUT, source files (name, size, local mtime) and training
    options, so a rerun of the same command reuses the tokenizer it trained."""
    files = [(str(p), size, 0 if isinstance(p, RemoteRoot) else Path(p).stat().st_mtime_ns) for p, size in sized]
    tokenizer: TokenizerConfig = config.tokenizer
    key = [out, files, tokenizer.vocab_size, tokenizer.bos, tokenizer.eos, tokenizer.pad, config.doc_sep, config.field]
    return hashlib.sha256(json.dumps(key, default=str).encode()).hexdigest()[:16]


def file_bytes(path: Any) -> int:
    """A text source file's size: a local file's, or a URL's object's (``RemoteRoot``)."""
    return path.size() if isinstance(path, RemoteRoot) else Path(path).stat().st_size


def item_config(plan: WorkPlan, node_folder: Path) -> Any:
    """The converter's config on the node: its carried tokenizer written under ``node_folder``, and as many
    converter processes as the item's CPUs."""
    config = plan.config
    if CARRIED_TOKENIZER in plan.carried:
        data = plan.carried[CARRIED_TOKENIZER]
        path = node_folder / f"tokenizer-{hashlib.sha256(data).hexdigest()[:16]}.json"
        if not path.is_file():
            node_folder.mkdir(parents=True, exist_ok=True)
            write_atomic(path, data)
        config = replace(config, tokenizer=replace(config.tokenizer, path=path))
    if hasattr(config, "num_workers"):
        config = replace(config, num_workers=plan.cpus_per_item)
    return replace(config, progress=False) if hasattr(config, "progress") else config


def _pack_images(config: Any, shared: Any, piece: Any, out: Path) -> tuple[int, int]:
    summary = pack_image_piece(config, piece, out)
    return summary.num_samples, summary.num_rejected


def _pack_coco(config: Any, shared: Any, piece: Any, out: Path) -> tuple[int, int]:
    summary = pack_coco_piece(config, shared, piece, out)
    return summary.num_samples, summary.num_rejected


def _pack_text(config: Any, shared: Any, piece: Any, out: Path) -> tuple[int, int]:
    summary = pack_text_piece(config, piece, out)
    return summary.samples, sum(summary.skipped.values())


IMAGES = PlanKind(plan_images, _pack_images)
COCO = PlanKind(plan_coco, _pack_coco)
TEXT = PlanKind(plan_text, _pack_text)
