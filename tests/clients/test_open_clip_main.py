"""open_clip's own ``open_clip_train.main`` (the wheel's) trains and evaluates on dataio's pair folders, with one hunk
of edit to its ``data.py`` (``open_clip_data.patch``: ``get_data`` returns dataio loaders in open_clip's
``DataInfo``), on one rank and on two under torchrun (gloo, CPU): the evaluation covers every pair, open_clip's
text pooling lands on the EOT in every row, the run exits 0."""

from __future__ import annotations

import difflib
import json
import re
import subprocess
import sys
from pathlib import Path

from tests.clients.conftest import CLIENTS, HERE
from tests.clients.open_clip_runs import main_args

COUNT = 40  # pairs in the pair_tars_text fixture, read as both the training and the validation set
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def hunks(before: str, after: str) -> int:
    return sum(1 for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=3)
               if line.startswith("@@"))


def test_the_users_edit_to_open_clip_is_one_hunk(patched):
    before = (CLIENTS / "open_clip_train" / "data.py").read_text()
    after = (patched / "open_clip_train" / "data.py").read_text()
    assert 1 <= hunks(before, after) <= 2
    assert "import dataio" in after


def run_main(command: list[str], patched: Path, data: Path, out: Path, client_env: dict, batch: int) -> dict:
    """open_clip_train.main over ``data`` (train and val), 1 epoch; its results.jsonl line, pooling counts, output."""
    env = {**client_env, "PYTHONPATH": f"{patched}:{client_env['PYTHONPATH']}"}
    args = [*command, str(HERE / "open_clip_run.py"),
            *main_args(patched, data, out, batch, "--val-data", str(data), "--epochs", "1", "--save-frequency", "0")]
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


def test_open_clip_main_on_one_rank(open_clip_one_rank):
    # the session's one run on one rank (2 epochs, batch 16), shared with tests/user43/test_open_clip_resume.py
    check_run(open_clip_one_rank, ranks=1)


def test_open_clip_main_on_two_ranks_evaluates_every_pair_on_rank_0(patched, pair_tars_text, client_env, tmp_path):
    run = run_main(TORCHRUN, patched, pair_tars_text, tmp_path, client_env, batch=8)
    check_run(run, ranks=2)
    # open_clip's training progress line: batches x 8 x 2 ranks over the pass's global count (num_samples), the 20
    # pairs of each rank's share read by both: "[16/40 (33%)]" first, "[48/40 (100%)]" last (open_clip counts the
    # short last batch as full), never "/20"
    progress = re.findall(r"Train Epoch: 0 \[\s*(\d+)/(\d+) \((\d+)%\)\]", run["log"])
    assert progress and {total for _, total, _ in progress} == {str(COUNT)}, progress
    assert progress[0] == ("16", "40", "33") and progress[-1][2] == "100"
