"""The scale run of issue 44: small synthetic images and short documents converted on a two-node local Ray
cluster and by one process, with the same output, time per block of samples, and the driver's peak memory.

    python -m dataio.bench.cluster_scale --images 1000000 --texts 1000000 --work DIR

Each kind is converted by ``dataio convert ... --engine ray --ray-address HOST:PORT`` (a cluster of separate
``ray start`` processes on 127.0.0.1, one CPU each: ``ray_local_cluster``) and by one process (``--workers 2``
for images); both outputs are compared sample for sample. The Ray driver is also run on ``--baseline``
samples, so its peak memory at two sizes shows what grows with the input (the plan's listing) and what does
not. Every figure goes to ``WORK/cluster_scale.json``; a table goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from dataio.formats.file_gate import write_atomic

from dataio.bench.cluster_scale_compare import same_samples
from dataio.bench.cluster_scale_data import TOKENIZER_DOCUMENTS, train_tokenizer, write_images, write_texts
from dataio.bench.cluster_scale_runs import (TimedRun, block_times, node_block_times, progress_points, ray_start,
                                             spread, timed_run)
from dataio.bench.ray_local_cluster import LocalRayCluster, ray_environment

KINDS = ("images", "texts")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m dataio.bench.cluster_scale", description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=1_000_000, help="images to convert (0: none)")
    parser.add_argument("--texts", type=int, default=1_000_000, help="documents to convert (0: none)")
    parser.add_argument("--work", type=Path, required=True, help="folder of the inputs, outputs and report")
    parser.add_argument("--block", type=int, default=100_000, help="samples per timed block")
    parser.add_argument("--item-samples", type=int, default=25_000, help="samples per Ray item (--items)")
    parser.add_argument("--baseline", type=int, default=100_000,
                        help="also run the Ray driver on this many samples of each kind, for its peak (0: not)")
    parser.add_argument("--cluster", choices=["nodes", "local"], default="nodes",
                        help="nodes: two `ray start` nodes of one CPU; local: each driver starts Ray in-process")
    parser.add_argument("--ray-address", default="",
                        help="HOST:PORT of a running Ray cluster to use instead of starting one (--cluster ignored)")
    parser.add_argument("--workers", type=int, default=2, help="the one-process image conversion's workers")
    parser.add_argument("--keep", action="store_true", help="keep the converted outputs (default: deleted)")
    args = parser.parse_args(argv)
    if min(args.images, args.texts, args.baseline) < 0 or min(args.block, args.item_samples, args.workers) < 1:
        parser.error("counts must be >= 0, --block, --item-samples and --workers >= 1")
    return args


def dataio_command() -> list[str]:
    """The ``dataio`` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("dataio")
    return [str(script)] if script.is_file() else [shutil.which("dataio") or "dataio"]


def machine() -> dict:
    """The CPU as lscpu names it, the CPU count, the load, and the versions that matter."""
    model = ""
    try:
        listed = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        model = next((line.split(":", 1)[1].strip() for line in listed.splitlines()
                      if line.startswith("Model name")), "")
    except (OSError, subprocess.SubprocessError):
        pass
    return {"cpu": model, "cpus": os.cpu_count(), "load": list(os.getloadavg()), "python": platform.python_version(),
            "ray": metadata.version("ray"), "dataio": metadata.version("torch-dataio")}


def convert_command(kind: str, inputs: list[Path], out: Path, engine: str, address: str, items: int,
                    args: argparse.Namespace, tokenizer: Path) -> list[str]:
    command = [*dataio_command(), "convert", "images" if kind == "images" else "text", *map(str, inputs), str(out)]
    if kind == "texts":
        command += ["--tokenizer", str(tokenizer)]
    if engine == "ray":
        return command + ["--engine", "ray", "--ray-address", address, "--items", str(items)]
    return command + (["--workers", str(args.workers)] if kind == "images" else [])


def figures(run: TimedRun, engine: str, samples: int, block: int, item_samples: int) -> dict:
    """A run's report: wall time, peaks, the seconds of each block (spread over the full blocks) and, for Ray,
    its start-up and each block's node seconds (``node_block_times``)."""
    points = progress_points(run, engine)
    blocks = block_times(points, block, samples)
    full = blocks[:samples // block]
    # blocks interpolated from fewer progress lines than blocks (a one-process run of half a minute prints one
    # line) are equal by construction: no spread is claimed from them
    measured = len(points) - 1 > len(full)
    extra: dict = {}
    if engine == "ray":
        plan_at, first_item_at = ray_start(run)
        node = node_block_times(run, block, item_samples)
        extra = {"plan_at_s": round(plan_at, 2), "startup_s": round(first_item_at - plan_at, 2),
                 "node_block_s": node, "node_block_spread": spread(node[:samples // block])}
    return {"command": run.command, "returncode": run.returncode, "wall_s": round(run.wall_s, 2),
            "driver_peak_rss": run.peak_rss, "children": run.children, "children_peak_rss": run.children_peak_rss,
            "children_peak_rss_sum": run.children_peak_rss_sum, "block_s": blocks,
            "block_spread": spread(full) if measured else None, "progress_lines": len(points) - 1, **extra,
            "progress": [[round(at, 2), count] for at, count in points], "stdout": run.stdout.strip()[-500:],
            "stderr_tail": [line for _, line in run.lines[-5:]]}


def plan_size(source: Path, items: int) -> dict:
    """The images plan the driver holds (listing, pieces), pickled: what grows with the input by design."""
    from dataio.formats.images.image_convert import ConvertImagesConfig  # lazy: only for this measurement
    from dataio.formats.plan.plan_kinds import PlanRequest, plan_images  # lazy: as above

    start = time.monotonic()
    planned = plan_images(ConvertImagesConfig(src=source, out=source.parent / "plan-probe"),
                          PlanRequest(out=str(source.parent / "plan-probe"), items=items, cluster_cpus=2))
    return {"pickled_bytes": len(pickle.dumps(planned)), "items": planned.plan.items,
            "seconds": round(time.monotonic() - start, 2)}


def convert_both(kind: str, samples: int, inputs: list[Path], args: argparse.Namespace, address: str,
                 tokenizer: Path, env: dict[str, str]) -> dict:
    """The Ray and the one-process conversion of ``inputs`` and whether they hold the same samples."""
    outs = {engine: args.work / "out" / f"{kind}-{samples}-{engine}" for engine in ("ray", "local")}
    items = max(2, math.ceil(samples / args.item_samples))
    report: dict = {"samples": samples, "items": items}
    for engine, out in outs.items():
        shutil.rmtree(out, ignore_errors=True)
        run = timed_run(convert_command(kind, inputs, out, engine, address, items, args, tokenizer), env)
        report[engine] = figures(run, engine, samples, args.block, math.ceil(samples / items))
        if run.returncode != 0:
            sys.exit(f"{kind} on {engine} failed ({run.returncode}): {report[engine]['stderr_tail']}")
    report["same_output"] = same_samples(kind, outs["ray"], outs["local"])
    if kind == "images":
        report["plan"] = plan_size(inputs[0], items)
    if not args.keep:
        for out in outs.values():
            shutil.rmtree(out, ignore_errors=True)
    return report


def driver_only(kind: str, samples: int, inputs: list[Path], args: argparse.Namespace, address: str,
                tokenizer: Path, env: dict[str, str]) -> dict:
    """The Ray driver alone on ``samples`` (its peak at a second size)."""
    out = args.work / "out" / f"{kind}-{samples}-ray"
    shutil.rmtree(out, ignore_errors=True)
    items = max(2, math.ceil(samples / args.item_samples))
    run = timed_run(convert_command(kind, inputs, out, "ray", address, items, args, tokenizer), env)
    if run.returncode != 0:
        sys.exit(f"{kind} baseline on ray failed ({run.returncode}): {[line for _, line in run.lines[-5:]]}")
    report = {"samples": samples, "items": items,
              "ray": figures(run, "ray", samples, args.block, math.ceil(samples / items))}
    if kind == "images":
        report["plan"] = plan_size(inputs[0], items)
    shutil.rmtree(out, ignore_errors=True)
    return report


def inputs_of(kind: str, samples: int, work: Path, env: dict[str, str]) -> tuple[list[Path], dict]:
    """The input files or folder of ``samples`` of ``kind`` (made once, kept in WORK)."""
    if kind == "images":
        folder = work / f"images-{samples}"
        return [folder], write_images(folder, samples)
    folder = work / f"texts-{samples}"
    made = write_texts(folder, samples, dataio_command(), env)
    return [folder / name for name in made["files"]], made


def run(args: argparse.Namespace) -> dict:
    """Make the inputs, start the cluster, convert each kind both ways, stop the cluster: the report."""
    args.work.mkdir(parents=True, exist_ok=True)
    env = ray_environment()
    started = time.monotonic()
    counts = {"images": args.images, "texts": args.texts}
    sample = min(TOKENIZER_DOCUMENTS, max(1000, args.texts))  # a toy run need not train on 20k documents
    tokenizer = train_tokenizer(args.work, dataio_command(), env, sample) if args.texts else Path()
    data = {kind: inputs_of(kind, n, args.work, env) for kind, n in counts.items() if n}
    small = {kind: inputs_of(kind, args.baseline, args.work, env) for kind, n in counts.items()
             if n and args.baseline}
    generate_s = round(time.monotonic() - started, 1)
    synced = time.monotonic()
    os.sync()  # the inputs just written reach the disk now, not while the first conversion is timed
    report: dict = {"machine": machine(), "generate_s": generate_s, "sync_s": round(time.monotonic() - synced, 1),
                    "inputs": {kind: made for kind, (_, made) in data.items()}, "block": args.block,
                    "cluster": "address" if args.ray_address else args.cluster}
    # the nodes' folder is short and apart from WORK: Ray's socket paths under it must stay within 107 bytes
    cluster = (LocalRayCluster(Path(tempfile.mkdtemp(prefix="dataio-ray-")))
               if args.cluster == "nodes" and not args.ray_address else None)
    report["ray_root"] = str(cluster.root) if cluster else None
    address = args.ray_address or (cluster.start() if cluster else "local")
    try:
        for kind, (inputs, _) in data.items():
            report[kind] = convert_both(kind, counts[kind], inputs, args, address, tokenizer, env)
        for kind, (inputs, _) in small.items():
            report[kind]["baseline"] = driver_only(kind, args.baseline, inputs, args, address, tokenizer, env)
    finally:
        if cluster:
            cluster.stop()
            shutil.rmtree(cluster.root, ignore_errors=True)
    report["load_after"] = list(os.getloadavg())
    return report


def table(report: dict) -> str:
    """The report as a Markdown table, one row per conversion."""
    mib = 2**20
    rows = ["| kind | engine | samples | wall s | start-up s | per-block s (wall) | spread | per-block node s | "
            "spread | driver peak MiB | children peak MiB |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for kind in KINDS:
        if kind not in report:
            continue
        runs = [(report[kind]["samples"], engine, report[kind][engine]) for engine in ("ray", "local")]
        if "baseline" in report[kind]:
            runs.append((report[kind]["baseline"]["samples"], "ray", report[kind]["baseline"]["ray"]))
        for samples, engine, fig in runs:
            node = fig.get("node_block_s")
            rows.append(f"| {kind} | {engine} | {samples:,} | {fig['wall_s']:.1f} | {fig.get('startup_s', '-')} | "
                        f"{' '.join(f'{s:.1f}' for s in fig['block_s'])} | {_percent(fig['block_spread'])} | "
                        f"{' '.join(f'{s:.1f}' for s in node) if node else '-'} | "
                        f"{_percent(fig.get('node_block_spread'))} | "
                        f"{fig['driver_peak_rss'] / mib:.0f} | {fig['children_peak_rss'] / mib:.0f} |")
    same = {kind: report[kind]["same_output"]["same"] for kind in KINDS if kind in report}
    return "\n".join(rows) + f"\n\nsame output (Ray vs one process): {same}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    path = args.work / "cluster_scale.json"
    write_atomic(path, (json.dumps(report, indent=1) + "\n").encode())
    print(table(report))
    print(f"report: {path}")
    return 0 if all(report[k]["same_output"]["same"] for k in KINDS if k in report) else 1


if __name__ == "__main__":
    sys.exit(main())
