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
            assert len(figures["block_s"]) == 2 and figures["block_spread"] is not None
            assert figures["progress"][-1][1] == 200
    assert [line for line in report["images"]["ray"]["stderr_tail"] if line.startswith("item ")]  # per item done
    assert report["images"]["local"]["children"] >= 1  # --workers 2: its worker processes measured apart
    assert report["images"]["plan"]["items"] == 2 and report["images"]["plan"]["pickled_bytes"] > 0
    assert not (work / "out" / "images-200-ray").exists()  # outputs deleted without --keep
    assert report["ray_root"] is None and _processes_naming(work / "ray") == []  # no cluster of its own
