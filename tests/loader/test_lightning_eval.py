"""Lightning fits with dataio train and val loaders (the default sanity check), then validates, tests and predicts:
one process and DDP on 2 CPU processes, every validation sample counted once (lightning_eval_script.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.conftest import NUM_COLOURED

SCRIPT = Path(__file__).resolve().parent / "lightning_eval_script.py"
EVERY_ONCE = Counter(range(NUM_COLOURED))


def run(command: list[str], out: Path, world_size: int) -> list[dict]:
    """Run the script; exit 0 and no traceback; each rank's record."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=SCRIPT.parents[2],
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world_size)]


def test_one_process_validates_tests_and_predicts_every_sample_once(coloured_shards, tmp_path):
    [record] = run([sys.executable, str(SCRIPT), str(coloured_shards), str(tmp_path)], tmp_path, 1)
    assert record["sanity_batches"] == 2 and record["trained_steps"] == 12  # 45 samples in batches of 4
    for stage in ("fit_val", "validate", "test", "predict"):
        assert Counter(record["counted"][stage]) == EVERY_ONCE, stage
    assert not any(record["repeats"].values())
    assert record["fit_metrics"]["fit_val_samples"] == record["validate"][0]["validate_samples"] == NUM_COLOURED
    assert record["test"][0]["test_rows"] == NUM_COLOURED and record["predictions"] == NUM_COLOURED


def test_ddp_on_two_processes_counts_every_validation_sample_once(coloured_shards, tmp_path):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(SCRIPT),
               str(coloured_shards), str(tmp_path)]
    records = run(command, tmp_path, 2)
    for record in records:  # every rank ran the same steps: 23 samples each, the second rank's last one a repeat
        assert record["sanity_batches"] == 2 and record["trained_steps"] == 6
        # Lightning's own sums over both ranks (sync_dist): the repeat left out, each sample counted once
        assert record["fit_metrics"]["fit_val_samples"] == NUM_COLOURED
        assert record["validate"][0]["validate_samples"] == NUM_COLOURED
        assert record["test"][0]["test_rows"] == NUM_COLOURED + 1  # the plain loader: the repeat is a row
    for stage in ("fit_val", "validate", "predict"):
        assert Counter(records[0]["counted"][stage] + records[1]["counted"][stage]) == EVERY_ONCE, stage
        # predict: Lightning's UnrepeatedDistributedSampler's shares, uneven and without a repeat (issue 43)
        assert records[0]["repeats"][stage] + records[1]["repeats"][stage] == (stage != "predict"), stage
    tested = Counter(records[0]["counted"]["test"] + records[1]["counted"]["test"])
    assert set(tested) == set(range(NUM_COLOURED)) and sum(tested.values()) == NUM_COLOURED + 1
    assert records[0]["predictions"] + records[1]["predictions"] == NUM_COLOURED
