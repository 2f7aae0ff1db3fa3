"""A DLO-JZ-shaped training script runs unchanged but for the loader line: alone and under 2-process torchrun (gloo)."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.conftest import NUM_COLOURED

SCRIPT = Path(__file__).resolve().parent / "dlojz_script.py"
ROOT = Path(__file__).resolve().parents[2]


def run(prefix: list[str], loader: str, images: Path, shards: Path, out: Path) -> list[dict]:
    command = [*prefix, str(SCRIPT), "--images", str(images), "--shards", str(shards), "--loader", loader,
               "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=ROOT,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(path.read_text()) for path in sorted(out.glob("rank*.json"))]


def check_epochs(records: list[dict], padding: int) -> None:
    """Every sample once per epoch over the ranks (plus ``padding`` repeats, as DistributedSampler pads)."""
    for epoch in range(2):
        seen = [s for record in records for s in record["seen"][epoch]]
        counts = Counter(seen)
        assert set(counts) == set(range(NUM_COLOURED)), f"epoch {epoch}: missing {set(range(NUM_COLOURED)) - set(counts)}"
        assert len(seen) == NUM_COLOURED + padding
    assert records[0]["seen"][0] != records[0]["seen"][1]  # set_epoch reshuffled
    for record in records:
        assert [entry["dataset"] for entry in record["log"]] == [NUM_COLOURED] * 2


def test_script_runs_alone_with_either_loader(coloured_folder, coloured_shards, tmp_path, monkeypatch):
    for loader in ("torch", "dataio"):
        out = tmp_path / loader
        if loader == "torch":  # its worker processes fork: from a fresh interpreter
            records = run([sys.executable], loader, coloured_folder, coloured_shards, out)
        else:  # threads only: run as __main__ in this interpreter (saves a start-up)
            monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--images", str(coloured_folder), "--shards",
                                              str(coloured_shards), "--loader", loader, "--out", str(out)])
            runpy.run_path(str(SCRIPT), run_name="__main__")
            records = [json.loads((out / "rank0.json").read_text())]
        assert len(records) == 1 and records[0]["log"][0]["steps"] == 12  # 45 images in batches of 4
        check_epochs(records, padding=0)


def test_script_runs_under_torchrun_with_dataio(coloured_folder, coloured_shards, tmp_path):
    prefix = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    records = run(prefix, "dataio", coloured_folder, coloured_shards, tmp_path)
    assert [r["world_size"] for r in records] == [2, 2]
    assert records[0]["log"][0]["steps"] == records[1]["log"][0]["steps"] == 6  # 23 per rank, as DistributedSampler
    check_epochs(records, padding=1)
