"""One timed conversion of the scale run: its stderr lines with the time each arrived, the peak memory of the
process and of its children (polled from ``/proc``), and the time at which every block of samples was done.

Peaks: ``VmHWM`` is the kernel's own high-water mark of a process's resident memory, so polling it every
quarter second misses nothing the process held for longer than its last poll; children (a one-process
conversion's workers) are read the same way, each one's peak and the largest sum of their current RSS.
Blocks: progress lines carry cumulative counts at known times (Ray: one line per item done, with the
seconds the item ran on its node; one process: a line every 30 s with its mean rate), and the time a count
crossed ``k * block`` is interpolated linearly between the two lines around it. Ray's clock starts when its
first item began packing; the start-up before (workers started, the plan shipped) is reported apart, being
paid once whatever the input's size.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

POLL_SECONDS = 0.25
RAY_ITEM_DONE = re.compile(r"^item (\d+) (?:done|already done) in ([\d.]+) s \((\d+) samples.*, (\d+) samples$")
RAY_PLAN = re.compile(r"^plan: \d+ items")
LOCAL_PROGRESS = re.compile(r"^(?:convert|tokenise): ([\d,]+)(?:/[\d,]+)? \w+(?: \(\d+%\))?, ([\d,.]+) \w+/s")


@dataclass
class TimedRun:
    """What one command did: its exit code, wall seconds, timed stderr lines and peak memories (bytes)."""

    command: list[str]
    returncode: int = -1
    wall_s: float = 0.0
    lines: list[tuple[float, str]] = field(default_factory=list)
    stdout: str = ""
    peak_rss: int = 0
    children_peak_rss: int = 0  # the largest peak of any one child
    children_peak_rss_sum: int = 0  # the largest sum of the children's resident memory at one poll
    children: int = 0


def _status_bytes(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):  # it ended while we looked
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = list(Path(f"/proc/{parent}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def timed_run(command: list[str], env: dict[str, str], cwd: Path | None = None) -> TimedRun:
    """Run ``command``, recording each stderr line's arrival (seconds from the start) and peak memories."""
    run = TimedRun(command)
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               cwd=cwd)

    def read_stderr() -> None:
        for line in process.stderr:
            run.lines.append((time.monotonic() - start, line.rstrip("\n")))

    def read_stdout() -> None:
        run.stdout = process.stdout.read()

    readers = [threading.Thread(target=read_stderr, daemon=True), threading.Thread(target=read_stdout, daemon=True)]
    for reader in readers:
        reader.start()
    peaks: dict[int, int] = {}
    while process.poll() is None:
        run.peak_rss = max(run.peak_rss, _status_bytes(process.pid, "VmHWM"))
        kids = _descendants(process.pid)
        for kid in kids:
            peaks[kid] = max(peaks.get(kid, 0), _status_bytes(kid, "VmHWM"))
        run.children_peak_rss_sum = max(run.children_peak_rss_sum, sum(_status_bytes(k, "VmRSS") for k in kids))
        time.sleep(POLL_SECONDS)
    run.wall_s = time.monotonic() - start
    for reader in readers:
        reader.join()
    run.returncode = process.returncode
    run.children_peak_rss, run.children = max(peaks.values(), default=0), len(peaks)
    return run


def ray_items(run: TimedRun) -> list[tuple[float, int, float, int]]:
    """Each Ray item's line: (arrival seconds, item, seconds the item ran on its node, its samples)."""
    return [(at, int(found.group(1)), float(found.group(2)), int(found.group(3))) for at, line in run.lines
            if (found := RAY_ITEM_DONE.match(line))]


def ray_start(run: TimedRun) -> tuple[float, float]:
    """(the plan line's arrival, the moment the first item began packing): the time between is the cluster's
    start-up (workers started, the plan shipped), paid once whatever the input's size."""
    plan = next((at for at, line in run.lines if RAY_PLAN.match(line)), 0.0)
    return plan, min((at - seconds for at, _, seconds, _ in ray_items(run)), default=plan)


def node_block_times(run: TimedRun, block: int, item_samples: int) -> list[float]:
    """Node seconds per ``block`` samples, by where the items lie in the input (items 0-3 are the first 100k of
    25k items): whether an item costs more the later it comes, free of how the cluster scheduled them."""
    spent: dict[int, list[float]] = {}
    for _, item, seconds, samples in ray_items(run):
        totals = spent.setdefault(item * item_samples // block, [0.0, 0])
        totals[0] += seconds
        totals[1] += samples
    return [round(spent[b][0] * block / spent[b][1], 2) for b in sorted(spent) if spent[b][1]]


def progress_points(run: TimedRun, engine: str) -> list[tuple[float, int]]:
    """(seconds, cumulative samples) from the run's progress lines, starting at (start of packing, 0): Ray's
    from the moment its first item began (``ray_start``), the one process's from its first line's mean rate."""
    if engine == "ray":
        done = [(at, int(found.group(4))) for at, line in run.lines if (found := RAY_ITEM_DONE.match(line))]
        return [(ray_start(run)[1], 0), *done] if done else []
    points: list[tuple[float, int]] = []
    for at, line in run.lines:
        if found := LOCAL_PROGRESS.match(line):
            count, rate = int(found.group(1).replace(",", "")), float(found.group(2).replace(",", ""))
            if not points and rate > 0:
                points.append((at - count / rate, 0))  # the line's rate is its mean since packing began
            points.append((at, count))
    return points


def block_times(points: list[tuple[float, int]], block: int, total: int) -> list[float]:
    """Seconds each ``block`` samples took (the last block may be shorter), interpolated between points."""
    crossings = []
    for target in [*range(block, total, block), total]:
        crossings.append(_crossing(points, target))
    if not points or any(c is None for c in crossings):
        return []
    edges = [points[0][0], *crossings]
    return [round(b - a, 3) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def _crossing(points: list[tuple[float, int]], target: int) -> float | None:
    for (t0, n0), (t1, n1) in zip(points[:-1], points[1:], strict=True):
        if n0 < target <= n1:
            return t0 + (t1 - t0) * (target - n0) / (n1 - n0)
    return None


def spread(times: list[float]) -> float | None:
    """max/min - 1 of the blocks' times: 0.15 is 15 % between the slowest and the fastest block."""
    return round(max(times) / min(times) - 1, 4) if times and min(times) > 0 else None
