"""A ``TextLoader`` under HF Accelerate: ``gather_for_metrics`` sees each row once, as with Accelerate's own
prepared DataLoaders (a subprocess under ``torchrun`` x2, exit code and stderr checked).

Text batches are dealt whole to the ranks, so the ranks' last batches differed in rows (1 real row on one rank,
a whole repeated batch of 8 on the other): Accelerate's gather of per-row values aborted the job inside gloo
(``op.preamble.length <= op.nbytes``), and the ``loss.repeat(batch_size)`` idiom counted the repeated batch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.ipc
import pytest

import dataio

SCRIPT = Path(__file__).resolve().parent / "accelerate_text_script.py"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def run(shards: Path, out: Path, mode: str, batch: int) -> list[dict]:
    command = TORCHRUN + [str(SCRIPT), str(shards), str(out), mode, str(batch)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def document_tokens(shards: Path) -> int:
    return sum(pyarrow.ipc.open_file(path).read_all().column("length").to_numpy().sum()
               for path in sorted(shards.glob("*.arrow")))


@pytest.mark.parametrize("mode, batch", [("fixed", 8), ("pack", 6)])  # each: an odd count of batches, the last of 1
def test_gather_for_metrics_counts_each_text_row_once(mode, batch, text_shards, tmp_path):
    plan = dataio.TextLoader(text_shards, mode=mode, batch_size=batch, block_size=64, shuffle=False).global_plan()[1]
    rows = int(plan.offsets[-1])
    assert len(plan) % 2 == 1 and plan.sizes()[-1] == 1  # the ranks' last batches: 1 row and a repeated batch
    records = run(text_shards, tmp_path, mode, batch)
    for rank, record in enumerate(records):
        assert record["world"] == [2, rank]  # the process group Accelerate started after the loader was built
        assert len(record["tokens"]) == rows and record["losses"] == rows  # each row once, the repeats dropped
        assert sum(record["tokens"]) == document_tokens(text_shards)
        if mode == "fixed":
            assert sorted(record["ids"]) == list(range(rows))
    assert records[0]["repeated"] + records[1]["repeated"] == 2 * batch - 1  # still flagged in the batches
