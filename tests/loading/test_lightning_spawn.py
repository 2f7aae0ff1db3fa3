"""Lightning's ``ddp_spawn`` pickles a DataModule whose ``__init__`` built dataio loaders (a subprocess, exit code and
stderr checked): the loaders are rebuilt in each spawned process from what they were built with, then follow the
process group Lightning starts there. Before, pickling them failed: ``TypeError: cannot pickle '_thread.lock'``."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections import Counter
from pathlib import Path

import dataio
from tests.conftest import NUM_COLOURED

HERE = Path(__file__).resolve().parent


def test_ddp_spawn_pickles_a_datamodule_holding_dataio_loaders(coloured_shards, tmp_path):
    done = subprocess.run([sys.executable, str(HERE / "lightning_spawn_script.py"), str(coloured_shards),
                           str(tmp_path)], capture_output=True, text=True, timeout=240, cwd=HERE.parents[1],
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [record["world"] for record in records] == [[2, 0], [2, 1]]
    for stage in ("train", "val"):
        ids = [i for record in records for batch in record["read"][stage] for i in batch]
        assert Counter(i for i in ids if i >= 0) == Counter(range(NUM_COLOURED)) and ids.count(-1) == 1, stage


def test_a_loader_pickles_as_what_it_was_built_with_and_its_position(coloured_shards, text_shards):
    image = dataio.ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=1, seed=3)
    iterator = iter(image)
    next(iterator)
    state = image.state_dict()
    del iterator
    copy = pickle.loads(pickle.dumps(image))
    assert copy is not image and copy.config == image.config and copy.state_dict() == state
    assert [labels.tolist() for _, labels in copy] == [labels.tolist() for _, labels in image]  # the same rest
    text = dataio.TextLoader(text_shards, mode="pack", block_size=64, batch_size=4, seed=2)
    rebuilt = pickle.loads(pickle.dumps(text.with_ids() if hasattr(text, "with_ids") else text))
    assert [b["input_ids"].tolist() for b in rebuilt] == [b["input_ids"].tolist() for b in text]
    image.close()
    copy.close()
