"""Accelerate's ``gather_for_metrics`` over pair loaders (docs/dataloader.md: each sample counted once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


@pytest.mark.parametrize("face", ["PairLoader", "DataLoader"])
def test_gather_for_metrics_counts_every_pair_once(pair_tars_text, tmp_path, face):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([*TORCHRUN, str(HERE / "accelerate_pairs_script.py"), str(pair_tars_text), str(tmp_path),
                           face], capture_output=True, text=True, timeout=240, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    for rank in range(2):  # gather_for_metrics hands every rank the whole gathered set
        gathered = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert Counter(gathered) == Counter(range(40)), (len(gathered), Counter(gathered).most_common(3))
