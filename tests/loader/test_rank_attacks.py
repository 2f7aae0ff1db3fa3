"""Issue 42's rank agreement and epoch digest, attacked as users run jobs: 2 gloo ranks under torchrun (or two
processes launched by hand, as on two nodes), each rank's record read back."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import NUM_COLOURED

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "rank_attack_script.py"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def _torchrun(mode: str, shards: Path, other: Path, out: Path) -> tuple[subprocess.CompletedProcess, list[dict]]:
    done = subprocess.run(TORCHRUN + [str(SCRIPT), mode, str(shards), str(other), str(out)], capture_output=True,
                          text=True, timeout=240, cwd=HERE.parents[1], env=ENV)
    return done, [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"))]


def test_a_validation_loader_built_in_the_training_loop_on_rank_0_alone_is_not_a_disagreement(coloured_shards,
                                                                                              tmp_path):
    # Loaders built in one loop share their calling lines; the ordinal among them shifts when rank 0 also builds
    # its validation loader there, so rank 0's validation loader (batch 1) is compared with rank 1's training
    # loader (batch 4): a correct job refused. The docs say a loader read on rank 0 alone matches nothing.
    done, records = _torchrun("loop", coloured_shards, coloured_shards, tmp_path)
    assert len(records) == 2, done.stderr[-3000:]
    assert all("error" not in r for r in records), records


def test_a_rank_that_stops_a_batch_early_is_named_sample_by_sample(coloured_shards, tmp_path):
    # docs: EpochMismatch on every rank, one line naming the samples and the ranks ('sample 24 never read
    # (planned on rank 1)'). The second look gathers each rank's *planned* ids, not the ids it handed out.
    done, records = _torchrun("early", coloured_shards, coloured_shards, tmp_path)
    assert len(records) == 2, done.stderr[-3000:]
    missing = set(range(NUM_COLOURED)) - set(records[0]["read"]) - set(records[1]["read"])
    assert missing, records
    for record in records:
        assert "EpochMismatch" in record.get("error", ""), record
        assert "never read" in record["error"], record["error"]
        assert f"sample {min(missing)} never read" in record["error"], record["error"]


def test_a_validation_loader_rebuilt_each_epoch_on_rank_0_does_not_delay_every_epoch(coloured_shards, tmp_path):
    # pytorch/examples validates on rank 0; a loader made per epoch is a new site ordinal each time, and each
    # waits the full 5 s for ranks that never build it: 3 epochs, 15 s added to a job of a few batches.
    done, records = _torchrun("epochs", coloured_shards, coloured_shards, tmp_path)
    assert len(records) == 2 and all("times" in r for r in records), (records, done.stderr[-3000:])
    times = records[0]["times"]
    assert sum(times[1:]) < 4.0, f"epochs took {times} s: each rebuilt rank-0 loader waited for other ranks"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ranks_on_other_data_are_refused_when_the_script_lies_at_another_path_on_each_node(
        coloured_shards, one_photo_fewer, tmp_path):
    # Two nodes: the same job script, copied to each node at another path (sbatch's spool, a per-node scratch).
    # The loader's site holds the script's file name, so the stale copy on rank 1 is never compared: both ranks
    # read on, overlapping shares, silently. The docs: every rank raises RanksDisagree naming the size.
    copy = tmp_path / "node1" / "rank_attack_script.py"
    copy.parent.mkdir()
    shutil.copy(SCRIPT, copy)
    out = tmp_path / "out"
    out.mkdir()
    port = _free_port()
    procs = []
    for rank, script in enumerate([SCRIPT, copy]):
        env = {**ENV, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2", "RANK": str(rank),
               "LOCAL_RANK": "0", "PYTHONPATH": str(HERE.parents[1])}
        procs.append(subprocess.Popen([sys.executable, str(script), "data", str(coloured_shards),
                                       str(one_photo_fewer), str(out)], env=env, cwd=HERE.parents[1],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    errs = [p.communicate(timeout=240)[1] for p in procs]
    records = [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"))]
    assert len(records) == 2, errs
    for record in records:
        assert "RanksDisagree" in record.get("error", ""), record
