"""Lightning over dataio.DataLoader as a user runs the stages after a fit: predict, validate, predict again on
one shared loader, then ``use_distributed_sampler=False``, 2 CPU ranks (docs/dataloader.md's table)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


@pytest.fixture(scope="module")
def records(forty_one, tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("lightning_stages")
    done = subprocess.run([sys.executable, str(HERE / "lightning_stages_script.py"), str(forty_one), str(out)],
                          capture_output=True, text=True, timeout=300, cwd=out, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.mark.parametrize("stage", ["predict1", "predict2"])
def test_every_predict_counts_41_of_41(records, stage):
    predicted = [i for r in records for i in r["read"][stage]]
    assert Counter(predicted) == Counter(range(41)), Counter(predicted).most_common(3)
    assert sum(r["counts"][stage] for r in records) == 41


def test_validate_after_predict_reads_distributed_sampler_shares(records):
    validated = [i for r in records for i in r["read"]["validate"]]
    assert len(validated) == 42 and Counter(i for i in validated if i >= 0) == Counter(range(41))
    assert [len(r["read"]["validate"]) for r in records] == [21, 21]


def test_use_distributed_sampler_false_reads_the_whole_set_on_each_rank(records):
    for r in records:  # docs/dataloader.md: "Trainer(use_distributed_sampler=False): the whole set"
        assert Counter(r["read"]["validate_unsharded"]) == Counter(range(41))
