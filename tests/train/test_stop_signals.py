"""dataio train stopped by the scheduler's signals (SIGTERM, SIGUSR1), a second signal during the save, and two
trainers on one --out: each run as a user meets it, a subprocess whose exit code and stderr are checked."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from dataio.train.stop_signals import StopSignals
from tests.train.test_progress import LINE
from tests.once_per_run import once_per_run
from tests.train.test_trainer import ROOT, cli

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
STOPPED = (r"dataio train: {what} at step (\d+): checkpoint saved to (\S+); rerun with --resume to continue\n")


def _args(shards: Path) -> list[str]:
    """14 photos in batches of 2: 7 steps an epoch, RandAugment drawing from the RNG the checkpoint must restore."""
    return ["train", "--train", str(shards), "--epochs", "2", "--image-size", "64", "--batch-size", "2",
            "--workers", "1", "--randaugment", "5"]


def _start(command: list[str], **options) -> subprocess.Popen:
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, text=True, env=ENV,
                            **options)


def _saved_step(out: Path) -> int:
    return torch.load(out / "checkpoint.pt", weights_only=True)["step"]


def _losses(out: Path) -> list[float]:
    return [s["loss"] for s in json.loads((out / "log.json").read_text())["steps"]]


@pytest.fixture(scope="module")
def whole(real_photo_shards, tmp_path_factory, worker_id) -> Path:
    """The uninterrupted run the stopped and resumed ones must equal (once per run: ``once_per_run``)."""
    def run(folder: Path) -> dict:
        done = cli(*_args(real_photo_shards), "--out", str(folder / "run"))
        assert done.returncode == 0, done.stderr[-2000:]
        return {"out": str(folder / "run")}
    return Path(once_per_run(tmp_path_factory, worker_id, "stop_signals_whole", run)["out"])


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGUSR1, 138)], ids=["SIGTERM", "SIGUSR1"])
def test_a_scheduler_signal_saves_writes_the_log_and_resume_continues_exactly(real_photo_shards, whole, tmp_path,
                                                                              signum, code):
    """Issue 33: SIGTERM (SLURM's preemption and time limit) and SIGUSR1 (``--signal``) killed the run at once,
    losing everything since the last checkpoint, with no log.json and no line."""
    out = tmp_path / "cut"
    process = _start([sys.executable, "-m", "dataio", *_args(real_photo_shards), "--out", str(out)])
    first = process.stdout.readline()
    assert LINE.fullmatch(first.rstrip("\n")), first  # the first step's line: training has begun
    process.send_signal(signum)
    _, err = process.communicate(timeout=300)
    name = signal.Signals(signum).name
    stopped = re.fullmatch(STOPPED.format(what=f"stopped by {name}"), err)
    assert process.returncode == code and stopped, (process.returncode, err[-3000:])
    step = int(stopped.group(1))
    assert Path(stopped.group(2)) == out / "checkpoint.pt" and _saved_step(out) == step < 14  # 7 steps an epoch
    so_far = json.loads((out / "log.json").read_text())
    assert so_far["summary"]["interrupted_at_step"] == step == len(so_far["steps"])
    assert not (out / ".dataio.lock").exists()
    resumed = cli(*_args(real_photo_shards), "--out", str(out), "--resume")
    assert resumed.returncode == 0 and resumed.stderr == "", resumed.stderr[-2000:]
    assert f"resumed from step {step}:" in resumed.stdout
    assert _losses(out) == _losses(whole)  # every step, the resumed ones included, as the uninterrupted run's
    cut, uncut = (torch.load(folder / "checkpoint.pt", weights_only=True) for folder in (out, whole))
    assert cut["step"] == uncut["step"] == 14
    assert all(torch.equal(tensor, cut["model"][key]) for key, tensor in uncut["model"].items())


def test_sigterm_under_torchrun_stops_every_rank_at_one_step_and_resumes_exactly(real_photo_shards, tmp_path):
    """As SLURM does, SIGTERM goes to every process of the job step: torchrun's agent (which sends each worker a
    SIGTERM of its own) and both workers (each in a session of its own); every rank saves at the same step and
    prints one line."""
    args = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "dataio",
            *_args(real_photo_shards)]
    process = _start(args + ["--out", str(tmp_path / "cut")])
    first = process.stdout.readline()
    assert LINE.fullmatch(first.rstrip("\n")), first
    workers = [int(pid) for pid in Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()]
    assert len(workers) == 2
    for pid in (process.pid, *workers):
        os.kill(pid, signal.SIGTERM)
    _, err = process.communicate(timeout=300)
    lines = re.findall(STOPPED.format(what="stopped by SIGTERM"), err)
    assert len(lines) == 2 and lines[0] == lines[1], err[-4000:]  # one line per rank, the same step
    step = int(lines[0][0])
    assert _saved_step(tmp_path / "cut") == step < 8  # 14 photos / (2 ranks x 2): 4 steps
    assert json.loads((tmp_path / "cut" / "log.json").read_text())["summary"]["interrupted_at_step"] == step
    resumed = subprocess.run(args + ["--out", str(tmp_path / "cut"), "--resume"], capture_output=True, text=True,
                             timeout=300, cwd=ROOT, env=ENV)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert f"resumed from step {step}:" in resumed.stdout
    whole = subprocess.run(args + ["--out", str(tmp_path / "whole")], capture_output=True, text=True, timeout=300,
                           cwd=ROOT, env=ENV)
    assert whole.returncode == 0, whole.stderr[-4000:]
    assert _losses(tmp_path / "cut") == _losses(tmp_path / "whole") and len(_losses(tmp_path / "whole")) == 8


# The trainer with a slow checkpoint write: a test hook (the writes of torch.save sleep), so that the second
# Ctrl-C lands while torch's zip writer is in the middle of the file. It prints when the save begins and ends.
SLOW_SAVE = """
import sys, time
import torch
from dataio.cli import main

real_save = torch.save


class SlowFile:
    def __init__(self, f):
        self.f = f

    def write(self, data):
        time.sleep(0.02)
        return self.f.write(data)

    def flush(self):
        self.f.flush()


def slow_save(state, f, **options):
    print("saving", flush=True)
    real_save(state, SlowFile(f), **options)
    print("saved", time.time(), flush=True)


torch.save = slow_save
sys.exit(main(sys.argv[1:]))
"""


def test_a_second_ctrl_c_during_the_save_waits_for_it_and_prints_one_line(real_photo_shards, tmp_path):
    """Issue 33: a second Ctrl-C while the checkpoint was being written ended in a 30-line traceback from torch's
    zip writer (and no checkpoint of that step)."""
    out = tmp_path / "run"
    process = _start([sys.executable, "-c", SLOW_SAVE, *_args(real_photo_shards), "--out", str(out)])
    first = process.stdout.readline()
    assert LINE.fullmatch(first.rstrip("\n")), first
    process.send_signal(signal.SIGINT)
    for line in process.stdout:
        if line == "saving\n":  # the stop's checkpoint
            break
    time.sleep(0.3)
    sent = time.time()
    process.send_signal(signal.SIGINT)
    rest, err = process.communicate(timeout=300)
    assert process.returncode == 130 and "Traceback" not in err, err[-3000:]
    stopped = re.fullmatch(STOPPED.format(what="interrupted"), err)
    assert stopped, err
    saved = re.search(r"^saved ([\d.]+)$", rest, re.MULTILINE)
    assert saved and float(saved.group(1)) > sent  # the second Ctrl-C came while torch.save was writing
    assert _saved_step(out) == int(stopped.group(1))  # that step's checkpoint, whole
    assert not list(out.glob(".checkpoint.pt.tmp-*"))


def test_a_second_trainer_on_the_same_out_is_refused_naming_the_holder(real_photo_shards, tmp_path):
    """Issue 33: a second trainer on one --out (a requeued job beside one still running) ran to its end, the two
    overwriting each other's checkpoints and logs."""
    out = tmp_path / "run"
    first = _start([sys.executable, "-m", "dataio", *_args(real_photo_shards), "--out", str(out)])
    try:
        assert LINE.fullmatch(first.stdout.readline().rstrip("\n"))
        first.send_signal(signal.SIGSTOP)  # holds OUT, however long the second takes to start
        second = cli(*_args(real_photo_shards), "--out", str(out))
    finally:
        first.send_signal(signal.SIGCONT)
    assert second.returncode == 2 and "Traceback" not in second.stderr, second.stderr[-3000:]
    assert second.stderr == (f"dataio train: error: output folder {out} is being written by another dataio process "
                             f"(pid {first.pid} on host {socket.gethostname()} holds {out / '.dataio.lock'}); wait "
                             "for it, or choose another folder\n")
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0 and err == "", err[-3000:]
    assert _saved_step(out) == 14 and not (out / ".dataio.lock").exists()


def test_saving_blocks_nest_and_a_second_ctrl_c_outside_them_stops_at_once():
    """The stop's block (checkpoint, then log.json and train.png) holds the checkpoint's own: leaving the inner one
    must not let a second Ctrl-C break the log's write."""
    signals = StopSignals(world_size=1)
    signals.install()
    try:
        with signals.saving():
            with signals.saving():
                os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)  # the checkpoint is written, log.json not yet
            time.sleep(0.01)
        assert signals.asked == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
    finally:
        signals.restore()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# The trainer with a slow evaluation: a test hook that says when each evaluation begins, so that a signal lands
# in it (the run has no --val: the losses are the uninterrupted run's).
SLOW_EVAL = """
import sys, time
from dataio.cli import main
from dataio.train import image_task

real_evaluate = image_task.ImageTask.evaluate


def slow_evaluate(self, network):
    print("evaluating", flush=True)
    time.sleep(1.0)
    return real_evaluate(self, network)


image_task.ImageTask.evaluate = slow_evaluate
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("evaluation", [1, 2], ids=["first", "last"])
def test_a_signal_during_the_evaluation_writes_the_log_or_lets_the_last_epoch_finish(real_photo_shards, whole,
                                                                                       tmp_path, evaluation):
    """SIGTERM while the epoch's evaluation ran: the checkpoint was written and the run exited 143, but without
    log.json (the docs promise it, marked ``interrupted_at_step``); in the last epoch's evaluation, after the
    last step, it exited 143 too, where the docs let the run finish. Now the first writes log.json and resumes
    exactly; the last finishes, exit 0."""
    out = tmp_path / "run"
    process = _start([sys.executable, "-c", SLOW_EVAL, *_args(real_photo_shards), "--out", str(out)])
    seen = 0
    for line in process.stdout:
        seen += line == "evaluating\n"
        if seen == evaluation:
            break
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=300)
    log = json.loads((out / "log.json").read_text())
    if evaluation == 1:
        assert process.returncode == 143, err[-3000:]
        assert err == f"dataio train: stopped by SIGTERM at step 7: checkpoint saved to {out / 'checkpoint.pt'}; " \
                      "rerun with --resume to continue\n"
        assert log["summary"]["interrupted_at_step"] == 7 == len(log["steps"]) == _saved_step(out)
        resumed = cli(*_args(real_photo_shards), "--out", str(out), "--resume")
        assert resumed.returncode == 0 and resumed.stderr == "", resumed.stderr[-2000:]
    else:
        assert process.returncode == 0 and err == "", err[-3000:]
        assert "interrupted_at_step" not in log["summary"] and len(log["steps"]) == 14
    assert _losses(out) == _losses(whole) and _saved_step(out) == 14
