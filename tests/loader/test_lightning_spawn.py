"""Lightning's ``ddp_spawn`` pickles a DataModule whose ``__init__`` built dataio loaders (a subprocess, exit code and
stderr checked): the loaders are rebuilt in each spawned process from what they were built with, then follow the
process group Lightning starts there. Before, pickling them failed: ``TypeError: cannot pickle '_thread.lock'``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.conftest import NUM_COLOURED

SCRIPT = Path(__file__).resolve().parent / "lightning_spawn_script.py"


def test_ddp_spawn_on_two_cpu_processes_rebuilds_the_datamodules_loaders_and_each_rank_reads_its_half(
        coloured_shards, tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), str(coloured_shards), str(tmp_path)], capture_output=True,
                          text=True, timeout=240, cwd=SCRIPT.parents[2],
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == "", done.stderr[-3000:]  # no traceback, and nothing at exit (threads, semaphores)
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [record["world"] for record in records] == [[2, 0], [2, 1]]  # the spawned process group's, followed
    for stage in ("train", "val"):
        shares = [[i for batch in record["read"][stage] for i in batch] for record in records]
        assert len(shares[0]) == len(shares[1]) == (NUM_COLOURED + 1) // 2, stage  # the same steps on each rank
        own = [{i for i in share if i >= 0} for share in shares]
        assert not own[0] & own[1] and own[0] | own[1] == set(range(NUM_COLOURED)), stage  # disjoint halves, all
        assert Counter(i for share in shares for i in share if i >= 0) == Counter(range(NUM_COLOURED)), stage
        assert sum(share.count(-1) for share in shares) == 1, stage  # one padding repeat, flagged
