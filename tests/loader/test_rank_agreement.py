"""Ranks compare what they read, not only their settings, and are matched by where each loader was built: run as
users run them (torchrun, 2 gloo ranks, exit codes, each rank's record)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import NUM_COLOURED

HERE = Path(__file__).resolve().parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def _run(kind: str, shards: Path, other: Path, out: Path) -> tuple[subprocess.CompletedProcess, list[dict]]:
    command = TORCHRUN + [str(HERE / "agreement_script.py"), kind, str(shards), str(other), str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=HERE.parents[1], env=ENV)
    records = [json.loads(path.read_text()) for path in sorted(out.glob("rank*.json"))]
    return done, records


@pytest.mark.parametrize("kind", ["data", "weights"])
def test_ranks_on_other_data_or_weights_are_refused_on_every_rank_naming_the_difference(
        kind, coloured_shards, one_photo_fewer, tmp_path):
    # Before: the agreement's key held the data's fingerprint (a mixture's with its weights), so such ranks were
    # never compared, and each read its own share of another order.
    done, records = _run(kind, coloured_shards, one_photo_fewer, tmp_path)
    assert done.returncode != 0, done.stderr[-2000:]
    assert len(records) == 2 and all("error" in r for r in records), (records, done.stderr[-2000:])
    for rank, record in enumerate(records):
        message = record["error"]
        assert "the ranks disagree on what decides their shares" in message and "\n" not in message
        if kind == "data":
            assert f"size is {NUM_COLOURED - rank} on rank {rank} and {NUM_COLOURED - 1 + rank} on rank " \
                   f"{1 - rank}" in message
            assert "dataset is" in message and "stale or partial copy" in message
        else:
            assert "weights is" in message and "0.7" in message and "0.5" in message


def test_a_loader_read_on_rank_0_alone_does_not_shift_the_matching(coloured_shards, tmp_path):
    # Before: loaders were matched by the order of their first passes, so rank 0's look at the data (batch size 1)
    # was compared with rank 1's training loader (batch size 4), and a correct job was refused.
    done, records = _run("extra", coloured_shards, coloured_shards, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    ids = Counter(i for record in records for batch in record["ids"] for i in batch)
    assert set(ids) == set(range(NUM_COLOURED)) and sum(ids.values()) == NUM_COLOURED + 1  # one padding repeat
