"""Lightning over dataio.DataLoader as a user runs the stages after a fit: predict, validate, predict again on
one shared loader, then ``use_distributed_sampler=False``, 2 CPU ranks (docs/dataloader.md's table)."""

from __future__ import annotations

from collections import Counter

import pytest


@pytest.fixture(scope="module")
def records(lightning_predict) -> list[dict]:
    """lightning_predict_script.py's ``stages`` run, each rank's record (the session's one launch of the script,
    tests/loader/predict_fixtures.py)."""
    return [r["stages"] for r in lightning_predict["records"]]


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
