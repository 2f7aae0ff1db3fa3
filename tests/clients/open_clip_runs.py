"""open_clip's own ``open_clip_train.main`` over dataio's pair folders, shared by tests/clients/test_open_clip_main.py
and tests/user43/test_open_clip_resume.py: the wheel's ``open_clip_train`` with the user's edit, and ONE run on one
rank that serves both (each start of open_clip's main costs ~10 s of imports here, and the suite has a time budget).
tests/conftest.py imports the fixtures (imported into each test module, a session fixture is one per module).
Not a test module."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clients.conftest import CLIENTS, HERE
from tests.once_per_run import once_per_run

PATCH = HERE / "open_clip_data.patch"
EPOCHS_RUN = HERE.parent / "user43" / "open_clip_epochs_run.py"
TINY = {"embed_dim": 16,  # a CLIP of a few thousand weights past its 49408-row token embedding: a step in ~0.1 s
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 8, "head_width": 16},
        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}}


@pytest.fixture(scope="session")
def patched(tmp_path_factory) -> Path:
    """A copy of the wheel's ``open_clip_train`` with the user's edit applied by ``git apply``: its folder."""
    root = tmp_path_factory.mktemp("open_clip_edited")
    shutil.copytree(CLIENTS / "open_clip_train", root / "open_clip_train",
                    ignore=shutil.ignore_patterns("__pycache__"))
    applied = subprocess.run(["git", "apply", "-p1", str(PATCH)], cwd=root, capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    (root / "TinyCLIP.json").write_text(json.dumps(TINY))
    return root


def main_args(patched: Path, data: Path, out: Path, batch: int, *args: str) -> list[str]:
    """``open_clip_run.py``'s arguments: open_clip_train.main over ``data``, its logs under ``out``."""
    return [str(patched / "TinyCLIP.json"), str(out / "pool"), "--", "--model", "TinyCLIP", "--train-data", str(data),
            "--batch-size", str(batch), "--workers", "0", "--device", "cpu", "--precision", "fp32",
            "--logs", str(out / "logs"), "--name", "run", "--report-to", "", "--warmup", "1", "--seed", "0", *args]


def run_epochs(patched: Path, data: Path, out: Path, client_env: dict, *args: str) -> dict:
    """open_clip_train.main on one rank through ``open_clip_epochs_run.py`` (open_clip_run.py plus the epoch each
    training pass reads): its epochs, last results.jsonl line (if it evaluated), pooling counts, output and
    checkpoint folder (JSON: a ``once_per_run`` result)."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**client_env, "PYTHONPATH": f"{patched}:{client_env['PYTHONPATH']}"}
    command = [sys.executable, str(EPOCHS_RUN), str(out / "epochs.jsonl"), *main_args(patched, data, out, 16, *args)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=out, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    results_file = out / "logs" / "run" / "checkpoints" / "results.jsonl"
    results = [json.loads(line) for line in results_file.open()] if results_file.exists() else [{}]
    return {"epochs": [json.loads(line)["epoch"] for line in (out / "epochs.jsonl").open()],
            "results": results[-1], "pools": [json.loads(p.read_text()) for p in sorted(out.glob("pool.*"))],
            "log": done.stdout + done.stderr, "checkpoints": str(out / "logs" / "run" / "checkpoints")}


@pytest.fixture(scope="session")
def open_clip_one_rank(patched, pair_tars_text, client_env, tmp_path_factory, worker_id) -> dict:
    """One uninterrupted run on one rank, once per run (``once_per_run``): 2 epochs over the pair folder as training
    and validation set, a checkpoint after each epoch; the 1-rank evaluation and pooling checks and the resume
    test's uninterrupted run."""
    return once_per_run(tmp_path_factory, worker_id, "open_clip_one_rank", lambda out: run_epochs(
        patched, pair_tars_text, out, client_env, "--val-data", str(pair_tars_text), "--epochs", "2",
        "--save-frequency", "1"))
