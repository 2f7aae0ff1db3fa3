"""Issue 43 item 9: Lightning ``predict`` over a loader shared with validation counts 41 of 41 on 2 ranks (it
counted 42: the loader padded as for validation, where Lightning gives torch's loader an unpadded sampler).
The run: lightning_predict_script.py's ``shared`` (the session's one launch, tests/loader/predict_fixtures.py)."""

from __future__ import annotations

from collections import Counter


def test_lightning_predict_over_the_validation_loader_counts_each_image_once(lightning_predict):
    stderr = lightning_predict["stderr"]
    assert "Traceback" not in stderr and "reads all 41 samples" not in lightning_predict["before_stages"], stderr[-3000:]
    records = [r["shared"] for r in lightning_predict["records"]]
    predicted = [i for r in records for i in r["read"]["predict"]]
    assert sum(r["predictions"] for r in records) == 41  # before: 42
    assert Counter(predicted) == Counter(range(41))  # each index once, no padding repeat
    assert sorted(len(r["read"]["predict"]) for r in records) == [20, 21]
    validated = [i for r in records for i in r["read"]["validate"]]  # validation: DistributedSampler's shares
    assert len(validated) == 42 and Counter(i for i in validated if i >= 0) == Counter(range(41))
    assert [len(r["read"]["train"]) for r in records] == [8, 8]  # 2 steps of 4: a share each, not the whole set
