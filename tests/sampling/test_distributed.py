"""Two-process ``torchrun`` runs on CPU (gloo): coverage, equal steps, kill-and-resume, elastic 2 -> 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import NUM_COLOURED

WORKER = Path(__file__).resolve().parents[1] / "dist_worker.py"


def torchrun(nproc: int, kind: str, shards: Path, out: Path, *extra: str) -> list[dict]:
    """Run ``dist_worker.py`` on ``nproc`` ranks; returns each rank's record."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               str(WORKER), kind, str(shards), str(out), *extra]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2], env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(nproc)]


def real_samples(records: list[dict]) -> list[int]:
    return [s for rec in records for batch, flags in zip(rec["batches"], rec["repeated"], strict=True)
            for s, repeated in zip(batch, flags, strict=True) if not repeated]


@pytest.fixture(scope="module")
def uninterrupted(coloured_shards, tmp_path_factory) -> list[dict]:
    return torchrun(2, "image", coloured_shards, tmp_path_factory.mktemp("full"))


def test_ranks_cover_the_data_with_equal_steps(uninterrupted):
    assert [rec["world_size"] for rec in uninterrupted] == [2, 2]  # read from torch.distributed
    assert len(uninterrupted[0]["batches"]) == len(uninterrupted[1]["batches"]) == 6  # 45 samples, shards of 7 and 3
    assert sorted(real_samples(uninterrupted)) == list(range(NUM_COLOURED))
    padding = sum(flag for rec in uninterrupted for flags in rec["repeated"] for flag in flags)
    assert padding == 1  # 45 over 2 ranks: one repeat, reported


def test_kill_and_resume_reproduces_the_uninterrupted_sequence(uninterrupted, coloured_shards, tmp_path):
    killed = torchrun(2, "image", coloured_shards, tmp_path / "a", "--stop-after", "2")
    resumed = torchrun(2, "image", coloured_shards, tmp_path / "b", "--resume", str(tmp_path / "a" / "state.json"))
    for rank in range(2):
        assert killed[rank]["batches"] + resumed[rank]["batches"] == uninterrupted[rank]["batches"]


def test_elastic_two_to_one_reads_the_rest_once(coloured_shards, tmp_path):
    first = torchrun(2, "image", coloured_shards, tmp_path / "a", "--stop-after", "3")
    rest = torchrun(1, "image", coloured_shards, tmp_path / "b", "--resume", str(tmp_path / "a" / "state.json"))
    seen = real_samples(first) + real_samples(rest)
    assert sorted(seen) == list(range(NUM_COLOURED))


def test_text_budget_batches_keep_ranks_in_step(text_shards, tmp_path):
    records = torchrun(2, "text", text_shards, tmp_path / "t")
    assert len(records[0]["batches"]) == len(records[1]["batches"])
    seen = real_samples(records)
    assert len(seen) == len(set(seen)) and len(seen) == json.loads((text_shards / "manifest.json").read_text())["num_samples"]
