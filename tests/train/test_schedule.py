"""The LR schedule: every total from 1 up, and a resumed run re-planned for more epochs or another batch size."""

from __future__ import annotations

from itertools import pairwise

import csv
import json
import math

import pytest

from dataio.train.schedule import END_DIV, START_DIV, OneCycle, Resumed, resume, state
from tests.train.test_trainer import cli

WARMUPS = (0.0, 0.05, 0.1, 0.3, 0.5, 0.95)  # --warmup: 0 (none), the default 0.1, and up to nearly all steps


@pytest.mark.parametrize("warmup", WARMUPS)
def test_every_total_from_1_to_200_gives_a_rise_a_peak_and_a_fall(warmup):
    peak = 0.4
    for total in range(1, 201):
        curve = OneCycle(peak=peak, total=total, warmup=warmup)
        lrs = [curve.lr(step) for step in range(total)]
        assert all(math.isfinite(lr) and 0 < lr <= peak for lr in lrs), (total, lrs)
        top = lrs.index(max(lrs))
        assert lrs[top] == pytest.approx(peak) and top == curve.warmup_steps < total
        assert all(a < b for a, b in zip(lrs[:top], lrs[1:top + 1], strict=True)), (total, "rise")
        assert all(a > b for a, b in pairwise(lrs[top:])), (total, "fall")
        if top > 0:
            assert lrs[0] == pytest.approx(peak / START_DIV)
        if total - top >= 2:
            assert lrs[-1] == pytest.approx(peak / START_DIV / END_DIV)
        assert abs(curve.warmup_steps - warmup * total) <= 0.5 or curve.warmup_steps == total - 1


def test_torchs_onecycle_fails_where_this_one_works():
    """The bug it replaces: OneCycleLR divides by zero when warmup x total is exactly 1 (10 steps at 0.1)."""
    import torch

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    with pytest.raises(ZeroDivisionError):
        torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=10, pct_start=0.1)
    assert OneCycle(peak=0.1, total=10, warmup=0.1).lr(0) == pytest.approx(0.1 / START_DIV)


def test_a_resume_with_the_same_plan_is_the_uninterrupted_schedule():
    curve = OneCycle(peak=0.1, total=50, warmup=0.1)
    for step in (1, 5, 25, 49):
        resumed = resume(OneCycle(peak=0.1, total=50, warmup=0.1), state(curve, step), step)
        assert resumed == curve
    assert resume(curve, None, 10) == curve  # a checkpoint without a schedule (older ones): the curve


@pytest.mark.parametrize("old_total,new_total,step", [(24, 48, 24), (24, 48, 12), (40, 20, 10), (10, 11, 10),
                                                      (1, 200, 1), (200, 201, 3)])
def test_a_replanned_schedule_continues_from_the_last_lr_then_follows_the_new_curve(old_total, new_total, step):
    old = OneCycle(peak=0.1, total=old_total, warmup=0.1)
    new = OneCycle(peak=0.1, total=new_total, warmup=0.1)
    resumed = resume(new, state(old, step), step)
    assert isinstance(resumed, Resumed)
    last = old.lr(step - 1)
    assert resumed.lr(step) == pytest.approx(last)  # no jump at the resume step
    ramp = resumed.ramp
    assert ramp == max(1, round(0.1 * (new_total - step)))
    lrs = [resumed.lr(s) for s in range(step, new_total)]
    assert all(0 < lr <= 0.1 for lr in lrs)
    # past the ramp: the new curve; within it: the straight blend of the last LR into it
    for s in range(step + ramp, new_total):
        assert resumed.lr(s) == new.lr(s)
    for k in range(min(ramp, new_total - step)):
        assert resumed.lr(step + k) == pytest.approx(last * (1 - k / ramp) + new.lr(step + k) * k / ramp)
    # a second resume with the same plan keeps the blend
    again = resume(OneCycle(peak=0.1, total=new_total, warmup=0.1), state(resumed, step + 1), step + 1)
    assert again == resumed


def _lrs(out) -> list[float]:
    return [s["lr"] for s in json.loads((out / "log.json").read_text())["steps"]]


def _csv_steps(out) -> list[int]:
    with open(out / "log.csv", newline="") as f:
        return [int(row["step"]) for row in csv.DictReader(f) if row["lr"]]


def test_ten_steps_then_more_epochs_extend_the_finished_run(real_photo_shards, tmp_path):
    """10 steps at warm-up 0.1 crashed OneCycleLR; resuming the finished run with more --epochs failed in it."""
    out = tmp_path / "run"  # 14 photos: 5 batches of 3 per epoch
    args = ["train", "--train", str(real_photo_shards), "--image-size", "64", "--batch-size", "3", "--workers", "1",
            "--warmup", "0.1", "--lr", "0.05", "--out", str(out), "--progress-every", "0"]
    first = cli(*args, "--epochs", "2")
    assert first.returncode == 0 and first.stderr == "", first.stderr[-2000:]
    assert "epoch 2/2 step=10 " in first.stdout
    before = _lrs(out)
    assert len(before) == 10 and max(before) == pytest.approx(0.05)
    assert before[-1] == pytest.approx(0.05 / START_DIV / END_DIV)
    extended = cli(*args, "--epochs", "4", "--resume")
    assert extended.returncode == 0 and extended.stderr == "", extended.stderr[-2000:]
    assert "resumed from step 10" in extended.stdout and "re-planned for 20 steps" in extended.stdout
    assert "epoch 4/4 step=20 " in extended.stdout
    after = _lrs(out)
    assert after[:10] == before  # the finished part is kept as it was
    assert after[10] == pytest.approx(before[-1])  # the resume step takes the last LR: no jump
    curve = OneCycle(peak=0.05, total=20, warmup=0.1)
    assert after[11:] == pytest.approx([curve.lr(s) for s in range(11, 20)])  # then the 20-step plan (ramp 1)
    assert _csv_steps(out) == list(range(1, 21))


def test_a_resume_with_another_batch_size_replans_from_the_saved_step(real_photo_shards, tmp_path):
    out = tmp_path / "run"
    args = ["train", "--train", str(real_photo_shards), "--image-size", "64", "--workers", "1", "--epochs", "2",
            "--out", str(out), "--progress-every", "0", "--checkpoint-every", "3"]
    killed = cli(*args, "--batch-size", "2", "--halt-after-steps", "5")
    assert killed.returncode == 75  # the last checkpoint is step 3: 6 of the 14 photos of epoch 0
    resumed = cli(*args, "--batch-size", "4", "--resume")
    assert resumed.returncode == 0 and resumed.stderr == "", resumed.stderr[-2000:]
    # 3 steps done + the 8 photos left / 4 + 14 photos / 4 (the last batch short) = 9 steps
    assert "resumed from step 3" in resumed.stdout and "re-planned for 9 steps" in resumed.stdout
    assert "epoch 2/2 step=9 " in resumed.stdout
    old = OneCycle(peak=0.1 * 2 / 256, total=14, warmup=0.1)  # the default SGD peak scales with the batch
    new = OneCycle(peak=0.1 * 4 / 256, total=9, warmup=0.1)
    lrs = _lrs(out)
    assert len(lrs) == 9 and lrs[:3] == pytest.approx([old.lr(s) for s in range(3)])
    assert lrs[3] == pytest.approx(old.lr(2))  # continues from the LR it stopped at
    assert lrs[4:] == pytest.approx([new.lr(s) for s in range(4, 9)])  # ramp of 1 step, then the new plan
    assert _csv_steps(out) == list(range(1, 10))  # the killed run's rows past its checkpoint are gone
