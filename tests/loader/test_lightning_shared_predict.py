"""Issue 43 item 9: Lightning ``predict`` over a loader shared with validation counts 41 of 41 on 2 ranks (it
counted 42: the loader padded as for validation, where Lightning gives torch's loader an unpadded sampler)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def test_lightning_predict_over_the_validation_loader_counts_each_image_once(forty_one, tmp_path):
    done = subprocess.run([sys.executable, str(HERE / "lightning_shared_predict_script.py"), str(forty_one),
                           str(tmp_path)], capture_output=True, text=True, timeout=240, cwd=tmp_path, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "reads all 41 samples" not in done.stderr, done.stderr[-3000:]
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    predicted = [i for r in records for i in r["read"]["predict"]]
    assert sum(r["predictions"] for r in records) == 41  # before: 42
    assert Counter(predicted) == Counter(range(41))  # each index once, no padding repeat
    assert sorted(len(r["read"]["predict"]) for r in records) == [20, 21]
    validated = [i for r in records for i in r["read"]["validate"]]  # validation: DistributedSampler's shares
    assert len(validated) == 42 and Counter(i for i in validated if i >= 0) == Counter(range(41))
    assert [len(r["read"]["train"]) for r in records] == [8, 8]  # 2 steps of 4: a share each, not the whole set
