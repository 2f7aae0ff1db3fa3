"""open_clip's ``--resume`` over dataio, with docs/pairs.md's edit of ``get_data``: the resumed run reads the epoch
it resumes at, as an uninterrupted run does (open_clip's ``DataInfo.set_epoch`` moves its own samplers and
webdataset's shared epoch; a dataio loader in ``DataInfo(loader)`` is moved by neither)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.clients.test_open_clip_main import patched  # noqa: F401  (fixture: open_clip_train with the docs' edit)

HERE = Path(__file__).resolve().parent


def main(patched: Path, data: Path, out: Path, client_env: dict, *args: str) -> list[int]:
    env = {**client_env, "PYTHONPATH": f"{patched}:{client_env['PYTHONPATH']}"}
    command = [sys.executable, str(HERE / "open_clip_epochs_run.py"), str(out / "epochs.jsonl"),
               str(patched / "TinyCLIP.json"), str(out / "pool"), "--", "--model", "TinyCLIP", "--train-data",
               str(data), "--batch-size", "16", "--workers", "0", "--device", "cpu", "--precision", "fp32",
               "--logs", str(out / "logs"), "--name", "run", "--report-to", "", "--save-frequency", "1",
               "--warmup", "1", "--seed", "0", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=out, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line)["epoch"] for line in (out / "epochs.jsonl").open()]


def test_a_resumed_run_reads_the_epoch_it_resumes_at(patched, pair_tars_text, client_env, tmp_path):  # noqa: F811
    whole, first, resumed = (tmp_path / name for name in ("whole", "first", "resumed"))
    for folder in (whole, first, resumed):
        folder.mkdir()
    assert main(patched, pair_tars_text, whole, client_env, "--epochs", "2") == [0, 1]
    assert main(patched, pair_tars_text, first, client_env, "--epochs", "1") == [0]
    checkpoint = first / "logs" / "run" / "checkpoints" / "epoch_1.pt"
    # open_clip logs "=> resuming checkpoint ... (epoch 1)" and trains its epoch 1 on the loader's epoch 0 again:
    # the same order and crops as the first epoch, where the uninterrupted run read epoch 1's
    assert main(patched, pair_tars_text, resumed, client_env, "--epochs", "2", "--resume", str(checkpoint)) == [1]
