"""The cluster scale run (issue 44, ``python -m dataio.bench.cluster_scale``) at a toy size, run as a user runs
it: on the worker's Ray head (``ray_head``, given with ``--ray-address``; its own two-node launcher costs two node
starts, and tests/cluster/test_two_node_conversion.py is the two-node test), the Ray and the one-process
conversions of images and text, the report's figures, and no cluster process started by the script. Only the CLI imports
``dataio.bench`` (tests/test_layout.py), so the script runs in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.ray_head import driver_env

ROOT = Path(__file__).resolve().parents[1]


def _scale(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(driver_env(), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "dataio.bench.cluster_scale", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _processes_naming(folder: Path) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes().decode(errors="replace") if entry.name.isdigit() else ""
        except OSError:
            continue
        if str(folder) in line:
            found.append(line.replace("\0", " ")[:200])
    return found


def test_bad_counts_are_a_usage_error(tmp_path) -> None:
    result = _scale("--images", "-1", "--work", str(tmp_path))
    assert result.returncode == 2 and "counts must be >= 0" in result.stderr and "Traceback" not in result.stderr


RUN_PARSING = """
import sys
from dataio.bench.cluster_scale_runs import (TimedRun, block_times, node_block_times, progress_points, ray_start,
                                             spread, timed_run)
run = TimedRun(command=[])
done = [(8.0, 0, 5.0), (9.0, 1, 6.0), (13.0, 3, 5.0), (15.0, 2, 7.0)]  # (arrival, item, node seconds)
run.lines = [(1.0, "plan: 4 items over 400 inputs into OUT")] + [
    (at, f"item {item} done in {seconds} s (100 samples, 0 rejected): {k + 1}/4 items, {100 * (k + 1)}/400 "
         f"inputs, {100 * (k + 1)} samples") for k, (at, item, seconds) in enumerate(done)]
assert ray_start(run) == (1.0, 3.0), ray_start(run)  # both first items began at 3.0: 2 s of start-up
points = progress_points(run, "ray")
assert points == [(3.0, 0), (8.0, 100), (9.0, 200), (13.0, 300), (15.0, 400)], points
assert block_times(points, 200, 400) == [6.0, 6.0]
assert node_block_times(run, 200, 100) == [11.0, 12.0]  # items 0-1, then 2-3: by place in the input
assert spread([11.0, 12.0]) == round(12 / 11 - 1, 4)
child = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; time.sleep(1.5)'])"
measured = timed_run([sys.executable, "-c", child], env={"PATH": "/usr/bin:/bin"})
assert measured.returncode == 0 and measured.children >= 1 and measured.children_peak_rss > 2**20, measured
print("ok")
"""


def test_ray_blocks_start_at_the_first_item_node_blocks_follow_places_and_children_are_measured() -> None:
    """The report's arithmetic on made-up progress lines, and a child process's peak measured apart (in a
    subprocess: only the CLI imports ``dataio.bench``)."""
    done = subprocess.run([sys.executable, "-c", RUN_PARSING], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=dict(driver_env(), PYTHONPATH=str(ROOT)))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


@pytest.mark.slow
def test_the_scale_run_converts_both_ways_on_a_given_cluster_and_reports_the_same_output(ray_head, tmp_path) -> None:
    work = tmp_path / "w"
    result = _scale("--images", "200", "--texts", "200", "--work", str(work), "--block", "100",
                    "--item-samples", "100", "--baseline", "0", "--ray-address", ray_head.address)
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-2000:]
    assert "| images | ray | 200 |" in result.stdout and "| texts | local | 200 |" in result.stdout
    report = json.loads((work / "cluster_scale.json").read_text())
    assert report["machine"]["cpus"] >= 1 and report["machine"]["ray"] and report["cluster"] == "address"
    for kind in ("images", "texts"):
        assert report[kind]["same_output"]["same"] and report[kind]["same_output"]["rows"] == [200, 200]
        assert report[kind]["items"] == 2
        for engine in ("ray", "local"):
            figures = report[kind][engine]
            assert figures["returncode"] == 0 and figures["wall_s"] > 0 and figures["driver_peak_rss"] > 2**20
            assert len(figures["block_s"]) == 2
            assert (figures["block_spread"] is not None) == (figures["progress_lines"] > 2)  # not from one line
            assert figures["progress"][-1][1] == 200
    assert [line for line in report["images"]["ray"]["stderr_tail"] if line.startswith("item ")]  # per item done
    for kind in ("images", "texts"):  # Ray's clock starts at its first item; its start-up is said apart
        ray = report[kind]["ray"]
        assert ray["startup_s"] >= 0 and ray["plan_at_s"] > 0 and len(ray["node_block_s"]) == 2
    assert isinstance(report["images"]["local"]["children"], int)  # 200 images may end between two polls
    assert report["images"]["plan"]["items"] == 2 and report["images"]["plan"]["pickled_bytes"] > 0
    assert not (work / "out" / "images-200-ray").exists()  # outputs deleted without --keep
    assert report["ray_root"] is None and _processes_naming(work / "ray") == []  # no cluster of its own
