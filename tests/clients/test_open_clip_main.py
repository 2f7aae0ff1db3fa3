"""open_clip's own ``open_clip_train.main`` (the wheel's) trains and evaluates on dataio's pair folders, with one hunk
of edit to its ``data.py`` (``open_clip_data.patch``: ``get_data`` returns dataio loaders in open_clip's
``DataInfo``), on one rank and on two under torchrun (gloo, CPU): the evaluation covers every pair, open_clip's
text pooling lands on the EOT in every row, the run exits 0."""

from __future__ import annotations

import difflib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clients.conftest import CLIENTS, HERE

PATCH = HERE / "open_clip_data.patch"
COUNT = 40  # pairs in the pair_tars_text fixture, read as both the training and the validation set
TINY = {"embed_dim": 16,  # a CLIP of a few thousand weights past its 49408-row token embedding: a step in ~0.1 s
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 8, "head_width": 16},
        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}}
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def hunks(before: str, after: str) -> int:
    return sum(1 for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=3)
               if line.startswith("@@"))


@pytest.fixture(scope="module")
def patched(tmp_path_factory) -> Path:
    """A copy of the wheel's ``open_clip_train`` with the user's edit applied by ``git apply``: its folder."""
    root = tmp_path_factory.mktemp("open_clip_edited")
    shutil.copytree(CLIENTS / "open_clip_train", root / "open_clip_train",
                    ignore=shutil.ignore_patterns("__pycache__"))
    applied = subprocess.run(["git", "apply", "-p1", str(PATCH)], cwd=root, capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    (root / "TinyCLIP.json").write_text(json.dumps(TINY))
    return root


def test_the_users_edit_to_open_clip_is_one_hunk(patched):
    before = (CLIENTS / "open_clip_train" / "data.py").read_text()
    after = (patched / "open_clip_train" / "data.py").read_text()
    assert 1 <= hunks(before, after) <= 2
    assert "import dataio" in after


def run_main(command: list[str], patched: Path, data: Path, out: Path, client_env: dict, batch: int) -> dict:
    """open_clip_train.main over ``data`` (train and val), 1 epoch; its results.jsonl line, pooling counts, output."""
    env = {**client_env, "PYTHONPATH": f"{patched}:{client_env['PYTHONPATH']}"}
    args = [*command, str(HERE / "open_clip_run.py"), str(patched / "TinyCLIP.json"), str(out / "pool"), "--",
            "--model", "TinyCLIP", "--train-data", str(data), "--val-data", str(data), "--batch-size", str(batch),
            "--epochs", "1", "--workers", "0", "--device", "cpu", "--precision", "fp32", "--logs", str(out / "logs"),
            "--name", "run", "--report-to", "", "--save-frequency", "0", "--warmup", "1", "--seed", "0"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=240, cwd=out, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in (out / "logs" / "run" / "checkpoints" / "results.jsonl").open()]
    pools = [json.loads(p.read_text()) for p in sorted(out.glob("pool.*"))]
    return {"results": results[-1], "pools": pools, "log": done.stdout + done.stderr}


def check_run(run: dict, ranks: int) -> None:
    results = run["results"]
    assert results["num_samples"] == COUNT  # rank 0's evaluation: recall over every pair of the folder
    assert f"/ {COUNT}]\t" in run["log"]  # open_clip's own progress line: "Eval Epoch: 1 [16 / 40]"
    assert 0 <= results["image_to_text_R@1"] <= 1 and "clip_val_loss" in results
    assert len(run["pools"]) == ranks
    for pool in run["pools"]:  # every text row pooled at its EOT (open_clip's argmax: CLIP's EOT is its largest id)
        assert pool["rows"] > 0 and pool["eot_pooled"] == pool["rows"]


def test_open_clip_main_on_one_rank(patched, pair_tars_text, client_env, tmp_path):
    run = run_main([sys.executable], patched, pair_tars_text, tmp_path, client_env, batch=16)
    check_run(run, ranks=1)


def test_open_clip_main_on_two_ranks_evaluates_every_pair_on_rank_0(patched, pair_tars_text, client_env, tmp_path):
    run = run_main(TORCHRUN, patched, pair_tars_text, tmp_path, client_env, batch=8)
    check_run(run, ranks=2)
