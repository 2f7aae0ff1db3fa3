"""PyTorch Lightning fits with dataio loaders (single process and DDP on CPU) and resumes mid-epoch from its checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import NUM_COLOURED
from tests.loader.lightning_script import fit

SCRIPT = Path(__file__).resolve().parent / "lightning_script.py"


def per_epoch(steps: list) -> list[list[int]]:
    epochs: dict[int, list[int]] = {}
    for epoch, ids in steps:
        epochs.setdefault(epoch, []).extend(ids)
    return [epochs[e] for e in sorted(epochs)]


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice on workers and logging intervals
        yield


def test_single_process_fit_sees_every_sample_and_resumes_mid_epoch(coloured_shards, tmp_path):
    full = fit(coloured_shards, tmp_path / "full")
    epochs = per_epoch(full)
    assert len(full) == 24 and len(epochs) == 2  # 45 samples in batches of 4, 2 epochs
    assert all(sorted(ids) == list(range(NUM_COLOURED)) for ids in epochs) and epochs[0] != epochs[1]
    first = fit(coloured_shards, tmp_path / "cut", stop_after=5)  # checkpoint at step 5 of 12
    checkpoint = tmp_path / "cut" / "epoch=0-step=5.ckpt"
    assert first == full[:5] and checkpoint.is_file()
    rest = fit(coloured_shards, tmp_path / "rest", resume=checkpoint)
    assert [tuple(step) for step in rest] == [tuple(step) for step in full[5:]]  # the loader position restored


def test_ddp_on_two_cpu_processes_sees_every_sample_once_and_resumes(coloured_shards, tmp_path):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(SCRIPT),
               str(coloured_shards), str(tmp_path), "--stop-after", "2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=SCRIPT.parents[2],
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"})
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for record in records:
        assert len(record["first"]) == 2 and len(record["rest"]) == 12 - 2  # 23 samples per rank: 6 steps/epoch
    for epoch in range(2):
        seen = [s for record in records for s in per_epoch(record["first"] + record["rest"])[epoch]]
        counts = Counter(seen)
        assert set(counts) == set(range(NUM_COLOURED)) and len(seen) == NUM_COLOURED + 1  # one padding repeat
