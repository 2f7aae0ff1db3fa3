"""dataio train while it runs: step progress (a bar on a terminal, lines in a file), log.csv, TensorBoard, Ctrl-C,
and bottleneck advice that fits the task."""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import re
import signal
import subprocess
import sys

import pytest
import torch

from dataio.cli import main
from dataio.formats.errors import ConfigError
from dataio.train.bottleneck import diagnose
from dataio.train.config import TrainConfig
from dataio.train.progress import Progress
from tests.train.test_trainer import ROOT, cli

LINE = re.compile(r"step (\d+)/(\d+) epoch (\d+)/(\d+) loss=[\d.]+ lr=\S+ [\d,]+ (img|tokens)/s eta \d+:\d\d:\d\d")


class FakeClock:
    def __init__(self, step_seconds: float) -> None:
        self.now, self.step_seconds = 0.0, step_seconds

    def __call__(self) -> float:
        self.now += self.step_seconds
        return self.now


def test_lines_come_every_n_seconds_with_rate_and_eta():
    stream = io.StringIO()
    progress = Progress(total=100, done=0, unit="img", every=30.0, stream=stream, tty=False, clock=FakeClock(10.0))
    for step in range(1, 11):  # 10 s of wall time per step, of which 0.5 s were the step's own
        progress.step(step=step, epoch=0, epochs=2, samples=16, seconds=0.5, loss=2.5, lr=0.1)
    progress.write("epoch 1/2 done")
    lines = stream.getvalue().splitlines()
    assert [int(LINE.match(line).group(1)) for line in lines[:-1]] == [1, 4, 7, 10]  # the first step, then 30 s
    assert lines[1] == "step 4/100 epoch 1/2 loss=2.5000 lr=0.1 32 img/s eta 0:00:48"  # 48 s: 96 steps x 0.5 s
    assert lines[-1] == "epoch 1/2 done" and "\r" not in stream.getvalue()


def test_on_a_terminal_it_is_a_bar_and_lines_pass_above_it():
    stream = io.StringIO()
    progress = Progress(total=20, done=5, unit="tokens", every=30.0, stream=stream, tty=True)
    for step in range(6, 9):
        progress.step(step=step, epoch=1, epochs=4, samples=2048, seconds=0.1, loss=3.0, lr=0.001)
    progress.write("epoch 2/4 step=8")
    progress.close()
    shown = stream.getvalue()
    assert "\r" in shown and "6/20" in shown and "tokens/s" in shown and "epoch 2/4 step=8\n" in shown
    assert not LINE.search(shown)  # no periodic lines beside the bar
    silent = io.StringIO()
    off = Progress(total=20, done=0, unit="img", every=0, stream=silent, tty=True)
    off.step(step=1, epoch=0, epochs=1, samples=4, seconds=0.1, loss=1.0, lr=0.1)
    off.write("epoch 1/1")
    assert silent.getvalue() == "epoch 1/1\n"  # --progress-every 0: the trainer's lines only


def test_a_run_into_a_file_prints_progress_lines_a_csv_and_tensorboard_scalars(real_photo_shards, tmp_path):
    out = tmp_path / "run"
    done = cli("train", "--train", str(real_photo_shards), "--val", str(real_photo_shards), "--epochs", "2",
               "--image-size", "64", "--batch-size", "4", "--workers", "1", "--out", str(out),
               "--progress-every", "0.01", "--tensorboard")
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    assert "\r" not in done.stdout
    progress = [LINE.fullmatch(line) for line in done.stdout.splitlines() if line.startswith("step ")]
    assert progress and all(progress), done.stdout
    assert progress[0].group(1, 2, 3, 4) == ("1", "8", "1", "2")  # 14 photos: 4 batches of 4 per epoch
    assert {m.group(5) for m in progress} == {"img"}
    with open(out / "log.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    steps = [r for r in rows if r["lr"]]
    epochs = [r for r in rows if not r["lr"]]
    assert [int(r["step"]) for r in steps] == list(range(1, 9))
    assert [(r["step"], r["epoch"]) for r in epochs] == [("4", "0"), ("8", "1")]
    assert all(0 <= float(r["val_acc"]) <= 1 and float(r["val_loss"]) > 0 and r["val_ppl"] == "" for r in epochs)
    assert all(float(r["per_second"]) > 0 and int(r["samples"]) in (2, 4) for r in steps)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("train/loss")] == list(range(1, 9))
    assert [e.value for e in events.Scalars("train/lr")] == pytest.approx([float(r["lr"]) for r in steps], rel=1e-5)
    assert [e.step for e in events.Scalars("val/acc")] == [4, 8]


def test_on_a_terminal_the_run_draws_a_bar(real_photo_shards, tmp_path):
    leader, follower = pty.openpty()
    args = [sys.executable, "-m", "dataio", "train", "--train", str(real_photo_shards), "--epochs", "1",
            "--image-size", "64", "--batch-size", "4", "--workers", "1", "--out", str(tmp_path / "run")]
    process = subprocess.Popen(args, stdout=follower, stderr=subprocess.PIPE, cwd=ROOT, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert process.wait(timeout=300) == 0 and process.stderr.read() == ""
    text = shown.decode()
    assert "\r" in text and "step/s" in text and "img/s" in text and "epoch 1/1 step=4 " in text
    assert not LINE.search(text)


def test_tensorboard_missing_is_one_line(real_photo_shards, tmp_path):
    hide = "import sys; sys.modules['tensorboard'] = None; from dataio.cli import main; sys.exit(main())"
    done = subprocess.run([sys.executable, "-c", hide, "train", "--train", str(real_photo_shards), "--image-size", "64",
                           "--out", str(tmp_path / "run"), "--tensorboard"], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr == ("dataio train: error: --tensorboard needs the tensorboard package, which is not "
                           "installed (pip install tensorboard)\n")
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


def test_ctrl_c_saves_a_checkpoint_and_resume_finishes_the_run(real_photo_shards, tmp_path):
    args = [sys.executable, "-m", "dataio", "train", "--train", str(real_photo_shards), "--epochs", "2",
            "--image-size", "64", "--batch-size", "2", "--workers", "1", "--randaugment", "5"]
    process = subprocess.Popen(args + ["--out", str(tmp_path / "cut")], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, cwd=ROOT, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    first = process.stdout.readline()
    assert LINE.fullmatch(first.rstrip("\n")), first  # the first step's line, whatever --progress-every says
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 130
    stopped = re.fullmatch(r"dataio train: interrupted at step (\d+): checkpoint saved to (\S+); rerun with "
                           r"--resume to continue\n", err)
    assert stopped, err
    saved = torch.load(stopped.group(2), weights_only=True)
    assert saved["step"] == int(stopped.group(1)) < 14 and "summary:" not in out  # 14 photos: 7 steps an epoch
    so_far = json.loads((tmp_path / "cut" / "log.json").read_text())  # the run so far, written at the stop
    assert so_far["summary"]["interrupted_at_step"] == saved["step"] == so_far["summary"]["steps"]
    resumed = cli(*args[3:], "--out", str(tmp_path / "cut"), "--resume")
    assert resumed.returncode == 0 and resumed.stderr == "", resumed.stderr[-2000:]
    assert f"resumed from step {saved['step']}" in resumed.stdout and "epoch 2/2 step=14 " in resumed.stdout
    finished = json.loads((tmp_path / "cut" / "log.json").read_text())["summary"]
    assert finished["steps"] == 14 and "interrupted_at_step" not in finished
    whole = cli(*args[3:], "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0
    cut = torch.load(tmp_path / "cut" / "checkpoint.pt", weights_only=True)
    uncut = torch.load(tmp_path / "whole" / "checkpoint.pt", weights_only=True)
    assert cut["step"] == uncut["step"] == 14
    assert all(torch.equal(tensor, cut["model"][name]) for name, tensor in uncut["model"].items())


def test_text_advice_never_suggests_channels_last():
    for input_bound in (False, True):
        for stages in ({"read": 0.2, "collate": 0.3, "copy": 1.5, "wait": 2.0}, {"read": 1.0, "wait": 1.0}):
            text = diagnose(stages, threads=1, input_bound=input_bound, unit="tokens")["advice"]
            image = diagnose(stages, threads=1, input_bound=input_bound, unit="img")["advice"]
            assert "channels_last" not in text and "uint8" not in text
            assert ("channels_last" in image) == (not input_bound)
    assert "--max-tokens" in diagnose({}, threads=1, input_bound=False, unit="tokens")["advice"]


def test_a_text_run_reports_tokens_and_text_advice(text_shards, tmp_path):
    out = tmp_path / "lm"
    done = cli("train", "--train", str(text_shards), "--model", "tiny_gpt", "--epochs", "1", "--optimizer", "adamw",
               "--max-tokens", "2048", "--out", str(out), "--progress-every", "0.01")
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    progress = [LINE.fullmatch(line) for line in done.stdout.splitlines() if line.startswith("step ")]
    assert progress and all(m and m.group(5) == "tokens" for m in progress), done.stdout
    advice = [line for line in done.stdout.splitlines() if line.startswith("bottleneck: ")]
    assert len(advice) == 1 and "channels_last" not in advice[0], done.stdout
    if advice[0].startswith("bottleneck: compute: "):
        assert "--max-tokens" in advice[0]


@pytest.mark.parametrize("seconds", ["-1", "nan", "inf", "soon"])
def test_a_bad_progress_interval_is_a_usage_error(seconds, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--train", str(tmp_path), "--progress-every", seconds])
    assert exit_info.value.code == 2 and "--progress-every" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="progress_every"):
        TrainConfig(train=tmp_path, progress_every=float("nan"))
