"""The Ray engine: a plan's items as Ray tasks with CPU and memory requests, and the merge on the driver.

Ray is imported only here, only when asked for (``pip install 'torch-dataio[ray]'``). Each item is one task
(``max_retries=0``): the driver resubmits an item whose attempt was lost (its node or worker died, an
unexpected error), up to ``retries`` more times, so each failed attempt is one line of progress and the
number of attempts is bounded. That is safe because items are idempotent (``plan_item``). A bad input or
bad options is not retried: the item returns the error's one line (no traceback crosses the cluster, and
no exception has to unpickle), and the driver stops with it. The plan's shared part (a COCO index) is put
in Ray's object store once; each task gets only its own piece.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dataio.formats.errors import DataioError, UsageError
from dataio.formats.plan.plan_item import ItemResult, run_item
from dataio.formats.plan.plan_kinds import PlannedWork
from dataio.formats.plan.work_plan import WorkPlan


CONNECT_TIMEOUT = 10.0  # seconds for the head's GCS port to answer before --ray-address is called unreachable


@dataclass(frozen=True, kw_only=True)
class RayOptions:
    """Where the cluster is and what each item asks of it."""

    address: str | None = None  # None: the running cluster (RAY_ADDRESS, or `ray start` here), else a local one
    cpus_per_item: int = 1
    memory_per_item: int = 2 * 2**30  # bytes of Ray's memory resource each item reserves
    retries: int = 3  # more attempts of an item whose attempt was lost

    def __post_init__(self) -> None:
        if self.cpus_per_item < 1 or self.memory_per_item < 1 or self.retries < 0:
            raise ValueError(f"cpus_per_item and memory_per_item must be >= 1 and retries >= 0, got "
                             f"{self.cpus_per_item}, {self.memory_per_item}, {self.retries}")


@dataclass(frozen=True)
class ItemFailure:
    """An item's bad input or options, as one line (and whether it is a usage error)."""

    item: int
    message: str
    usage: bool


def item_task(plan: WorkPlan, shared: Any, piece: Any, item: int) -> ItemResult | ItemFailure:
    """What a Ray worker runs: the item, or its DataioError as one line."""
    try:
        return run_item(plan, shared, piece, item)
    except DataioError as e:
        return ItemFailure(item, str(e), isinstance(e, UsageError))


def cluster_cpus(address: str | None) -> int:
    """The CPUs of the cluster at ``address`` (connecting to it, or starting a local one)."""
    _connect(address)
    import ray  # lazy: Ray is an optional extra, imported only for --engine ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _connect(address: str | None) -> None:
    """Connect once; an address where nothing answers, or Ray missing, is one line (``ray.init`` would retry for
    minutes, printing its C++ client's log lines)."""
    try:
        import ray  # lazy: Ray is an optional extra, imported only for --engine ray
    except ImportError as e:
        raise UsageError(f"--engine ray needs Ray: pip install 'torch-dataio[ray]' ({e})") from None
    if ray.is_initialized():
        return
    if address and address not in ("local", "auto") and "://" not in address:
        _check_answers(address)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise UsageError(f"--ray-address {address or '(default)'}: cannot connect to a Ray cluster "
                         f"({type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]})") from None


def _check_answers(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """A TCP connection to the cluster's GCS port within ``timeout`` seconds, else UsageError."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout):
            return
    except ValueError:
        raise UsageError(f"--ray-address {address}: give HOST:PORT of the head (6379 by default), ray://HOST:PORT, "
                         "local or auto") from None
    except OSError as e:
        raise UsageError(f"--ray-address {address}: no Ray cluster answers there ({e.strerror or e}); start one "
                         "with `ray start --head`, or leave --ray-address out for a local one") from None


def check_fits(options: RayOptions) -> None:
    """An item must fit on some live node, or Ray would wait for such a node forever: UsageError naming the flag."""
    import ray  # lazy: Ray is an optional extra, imported only for --engine ray

    nodes = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]
    cpus = max((float(n.get("CPU", 0)) for n in nodes), default=0.0)
    memory = max((float(n.get("memory", 0)) for n in nodes), default=0.0)
    if options.cpus_per_item > cpus:
        raise UsageError(f"--cpus-per-item {options.cpus_per_item}: the largest node of the cluster has {cpus:g} CPUs; "
                         "no item could start")
    if options.memory_per_item > memory:
        raise UsageError(f"--memory-per-item {options.memory_per_item:,} bytes: the largest node of the cluster offers "
                         f"{memory:,.0f} bytes of Ray memory; no item could start")


def run_on_ray(planned: PlannedWork, options: RayOptions, say: Callable[[str], None]) -> list[ItemResult]:
    """Run every item of ``planned`` on the cluster; each item's result in item order."""
    _connect(options.address)
    check_fits(options)
    import ray  # lazy: Ray is an optional extra, imported only for --engine ray
    from ray import exceptions  # lazy: as above

    plan = planned.plan
    task = ray.remote(item_task).options(num_cpus=options.cpus_per_item, memory=options.memory_per_item,
                                        max_retries=0, retry_exceptions=False)
    shared = ray.put(planned.shared)
    pending: dict[Any, tuple[int, int]] = {}

    def submit(item: int, attempt: int) -> None:
        pending[task.remote(plan, shared, planned.pieces[item], item)] = (item, attempt)

    for item in range(plan.items):
        submit(item, 1)
    results: dict[int, ItemResult] = {}
    units_done, units = 0, sum(planned.units)
    while pending:
        (ref,), _ = ray.wait(list(pending), num_returns=1)
        item, attempt = pending.pop(ref)
        try:
            outcome = ray.get(ref)
        except exceptions.RayError as e:  # its node or worker died, or an unexpected error in the item
            reason = _reason(e)
            if attempt > options.retries:
                raise DataioError(f"item {item} ({plan.item_name(item)}) failed {attempt} times, last: {reason}; "
                                  "run the same command again to resume from the finished items") from None
            say(f"item {item} ({plan.item_name(item)}) attempt {attempt} failed: {reason}; retrying")
            submit(item, attempt + 1)
            continue
        if isinstance(outcome, ItemFailure):
            for other in pending:
                ray.cancel(other, force=True)
            raise (UsageError if outcome.usage else DataioError)(outcome.message)
        results[item] = outcome
        units_done += planned.units[item]
        samples = sum(r.samples for r in results.values())
        state = "already done" if outcome.skipped else "done"
        say(f"item {item} {state} in {outcome.seconds:.1f} s ({outcome.samples} samples, {outcome.rejected} "
            f"rejected): {len(results)}/{plan.items} items, {units_done}/{units} inputs, {samples} samples")
    return [results[item] for item in range(plan.items)]


def _reason(error: BaseException) -> str:
    """One line for a lost attempt: the error's class and its first line (no traceback)."""
    from ray import exceptions  # lazy: as above

    if isinstance(error, exceptions.RayTaskError) and error.cause is not None:
        error = error.cause
    first = (str(error).strip().splitlines() or [""])[0][:300]
    return f"{type(error).__name__}: {first}" if first else type(error).__name__
