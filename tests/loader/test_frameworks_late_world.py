"""Frameworks that start the process group after the loaders are built (Lightning DataModules, Accelerate scripts),
their gathers, and ranks that disagree on the seed: run as users run them (subprocesses, exit codes, stderr)."""

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
EVERY_ONCE = Counter(range(NUM_COLOURED))
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def run(command: list[str], out: Path, timeout: int = 240) -> list[dict]:
    """Run a two-rank script; exit 0 and no traceback; each rank's record."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=HERE.parents[1], env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def read_ids(records: list[dict], stage: str) -> tuple[Counter, int]:
    """Every sample id the ranks read in ``stage`` (repeats left out), and the count of repeats."""
    ids = [i for record in records for batch in record["read"][stage] for i in batch]
    return Counter(i for i in ids if i >= 0), ids.count(-1)


def test_lightning_ddp_with_loaders_built_in_the_datamodule_init(coloured_shards, tmp_path):
    records = run([sys.executable, str(HERE / "lightning_late_script.py"), str(coloured_shards), str(tmp_path)],
                  tmp_path)
    for rank, record in enumerate(records):  # built with world size 1, read with the process group's
        assert record["world"] == [2, rank] and record["train_len"] == 6  # 23 of 45 samples each, batches of 4
        assert len(record["read"]["train"]) == 6  # before the fix: 12 steps, the whole data set on each rank
    for stage in ("train", "fit_val", "validate"):
        counted, repeats = read_ids(records, stage)
        assert counted == EVERY_ONCE and repeats == 1, stage
    predicted, repeats = read_ids(records, "predict")  # even_batches=False: no repeat to write out
    assert predicted == EVERY_ONCE and repeats == 0
    assert records[0]["predictions"] + records[1]["predictions"] == NUM_COLOURED


def test_accelerate_with_loaders_built_before_the_accelerator(coloured_shards, tmp_path):
    records = run(TORCHRUN + [str(HERE / "accelerate_script.py"), str(coloured_shards), str(tmp_path)], tmp_path)
    trained = Counter()
    for rank, record in enumerate(records):
        assert record["prepared_is_loader"]  # prepare() hands a dataio loader back unchanged
        assert record["world"] == [2, rank] and record["train_len"] == len(record["train"]) == 6
        assert all(device.split()[0] == device.split()[1].split(":")[0] for device in record["devices"])
        assert record["resumed"] == record["train"][2:]  # save_state after step 2, load_state: the same rest
        trained.update(i for batch in record["train"] for i in batch)
        # gather_for_metrics: each validation sample once, as with Accelerate's own prepared torch DataLoader
        for gathered in (record["gathered"], record["torch_gathered"]):
            assert gathered["rows"] == NUM_COLOURED
            assert Counter({int(k): v for k, v in gathered["seen"].items()}) == EVERY_ONCE
        assert "load_state_dict" in record["skip_first_batches"]  # refused, naming the way to resume
    assert set(trained) == set(range(NUM_COLOURED)) and sum(trained.values()) == NUM_COLOURED + 1  # one repeat
    # beside Accelerate's prepare(torch DataLoader) over the same 45 samples in the same script: the same batches a
    # rank (6), every sample read in the epoch; torch's loader completes the last short batch with 3 of the epoch's
    # first samples (24 + 24 rows), dataio's shares repeat one (23 + 23): padding no larger than Accelerate's
    reference = Counter(i for record in records for batch in record["torch_train"] for i in batch)
    assert set(reference) == set(trained) == set(range(NUM_COLOURED))
    assert [len(r["torch_train"]) for r in records] == [len(r["train"]) for r in records] == [6, 6]
    assert NUM_COLOURED < sum(trained.values()) <= sum(reference.values()) == 48


@pytest.mark.parametrize("kind", ["text", "image"])
def test_ranks_seeded_apart_are_refused_at_the_first_pass(kind, text_shards, coloured_shards, tmp_path):
    shards = text_shards if kind == "text" else coloured_shards
    command = TORCHRUN + [str(HERE / "seed_per_rank_script.py"), kind, str(shards), str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=HERE.parents[1], env=ENV)
    assert done.returncode != 0
    assert "the ranks disagree on what decides their shares: seed is 133" in done.stderr, done.stderr[-2000:]
    same = run(command + ["--same-seed"], tmp_path)  # one seed: the whole set read, repeats only as padding
    ids = Counter(i for record in same for batch in record["ids"] for i in batch)
    assert set(ids) == set(range(same[0]["samples"]))
    assert sum(ids.values()) - len(ids) <= (8 if kind == "text" else 1)  # at most a padding batch (text) or sample


@pytest.mark.parametrize("kind", ["text", "image"])
def test_a_pass_before_the_process_group_does_not_spare_the_agreement(kind, text_shards, coloured_shards, tmp_path):
    # One batch read before init_process_group (world size 1, nothing to compare with) marked the loader agreed:
    # its passes on 2 ranks seeded apart then overlapped (369 text rows read, 93 samples never), silently.
    shards = text_shards if kind == "text" else coloured_shards
    command = TORCHRUN + [str(HERE / "seed_per_rank_script.py"), kind, str(shards), str(tmp_path), "--peek"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=HERE.parents[1], env=ENV)
    assert done.returncode != 0
    assert "the ranks disagree on what decides their shares: seed is 133" in done.stderr, done.stderr[-2000:]
    same = run(command + ["--same-seed"], tmp_path)  # one seed: the world followed, every sample read
    ids = Counter(i for record in same for batch in record["ids"] for i in batch)
    assert set(ids) == set(range(same[0]["samples"]))
