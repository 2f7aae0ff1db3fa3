"""``--engine ray``: a conversion or an index planned as items (``formats/plan``) and run on a Ray cluster."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from dataio.cli.flags import positive, storage_options_of
from dataio.formats.errors import UsageError
from dataio.formats.sizes import parse_size


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """The engine and what each item asks of it."""
    parser.add_argument("--engine", choices=["local", "ray"], default="local",
                        help="local: this process (one rank of a split with --rank/--world-size); ray: the input "
                             "cut into items run as Ray tasks across a cluster, merged by this process "
                             "(pip install 'torch-dataio[ray]')")
    parser.add_argument("--ray-address", help="--engine ray: the cluster (host:port, or ray://...; default: the "
                        "running cluster, from RAY_ADDRESS or `ray start` on this machine, else a local one)")
    parser.add_argument("--items", type=positive, help="--engine ray: how many items the input is cut into "
                        "(default: about 256 MiB of input each, at least 2 per CPU of the cluster)")
    parser.add_argument("--cpus-per-item", type=positive,
                        help="--engine ray: CPUs each item reserves (its converter's worker processes; default 1)")
    parser.add_argument("--memory-per-item", metavar="SIZE",
                        help="--engine ray: memory each item reserves (Ray's memory resource; default 2GiB)")
    parser.add_argument("--item-retries", type=int,
                        help="--engine ray: more attempts of an item whose node or worker was lost (default 3)")


def wants_ray(args: argparse.Namespace) -> bool:
    """Whether ``args`` asked for the Ray engine; ranks and Ray together are refused."""
    if getattr(args, "engine", "local") != "ray":
        for flag in ("ray_address", "items", "cpus_per_item", "memory_per_item", "item_retries"):
            if getattr(args, flag, None) is not None:
                raise UsageError(f"--{flag.replace('_', '-')} is for --engine ray")
        return False
    if getattr(args, "rank", None) is not None or getattr(args, "world_size", None) is not None:
        raise UsageError("--engine ray cuts the input into items itself; --rank/--world-size are for the local engine")
    args.cpus_per_item = 1 if args.cpus_per_item is None else args.cpus_per_item
    args.memory_per_item = "2GiB" if args.memory_per_item is None else args.memory_per_item
    args.item_retries = 3 if args.item_retries is None else args.item_retries
    if args.item_retries < 0:
        raise UsageError(f"--item-retries must be >= 0, got {args.item_retries}")
    return True


def run_planned(args: argparse.Namespace, kind: str, config: Any, strict: bool = False, out: Any = None) -> int:
    """Plan ``config`` (a converter's, kind ``kind``), run its items on Ray, merge into ``out`` (or ``args.out``;
    an index: the tars' folder)."""
    from dataio.formats.file_gate import read_input
    from dataio.formats.limits import MAX_STATE_FILE_BYTES
    from dataio.formats.plan.plan_driver import plan_of, run_plan
    from dataio.formats.plan.plan_kinds import PlanRequest
    from dataio.formats.plan.plan_table import plan_kind
    from dataio.formats.plan.ray_engine import RayOptions, check_fits, cluster_cpus, run_on_ray

    out = str(args.out if out is None else out)
    options = RayOptions(address=args.ray_address or os.environ.get("RAY_ADDRESS") or None,
                         cpus_per_item=args.cpus_per_item,
                         memory_per_item=parse_size(args.memory_per_item), retries=args.item_retries)
    given_staging = getattr(args, "staging", None)
    request = PlanRequest(out=out, items=args.items, cluster_cpus=cluster_cpus(options.address),
                          cpus_per_item=args.cpus_per_item, staging=str(given_staging) if given_staging else None,
                          storage_options=storage_options_of(args.storage_option) if "://" in out else None)
    check_fits(options)  # before OUT is touched: an item no node can hold would wait forever
    planned = plan_of(kind, config, request)
    quiet = getattr(args, "no_progress", False)

    def say(line: str) -> None:
        if not quiet or "failed" in line:  # a failed attempt is always said
            print(line, file=sys.stderr, flush=True)

    say(f"plan: {planned.plan.items} items over {sum(planned.units)} inputs into {out}")
    outcome = run_plan(planned, lambda work, said: run_on_ray(work, options, said), overwrite=args.overwrite, say=say)
    rejected = outcome.merged_here / "rejected.jsonl"
    if plan_kind(kind).says_rejected and rejected.is_file():
        for line in read_input(rejected, MAX_STATE_FILE_BYTES).decode("utf-8").splitlines():
            if line.strip():
                entry = json.loads(line)
                print(f"rejected {entry['path']}: {entry['reason']}", file=sys.stderr)
    manifest = outcome.manifest
    done = sum(r.skipped for r in outcome.results)
    where = f"from {outcome.items} items on Ray ({done} already done)"
    print(plan_kind(kind).summary(manifest, planned, out, where))
    return 1 if strict and manifest.num_rejected else 0
