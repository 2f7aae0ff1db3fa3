"""The CLIP loss and evaluation on two ranks (torchrun, gloo) equal one process on the concatenated batch and set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.once_per_run import once_per_run
from tests.train.clip_dist_worker import OPTIONS, batch_of, model_for, task_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory, worker_id) -> list[dict]:
    """The torchrun launch, once per run (``once_per_run``: this module's tests may land on both workers)."""
    def launch(out: Path) -> dict:
        done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                               "-m", "tests.train.clip_dist_worker", str(out)], capture_output=True, text=True,
                              timeout=300, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert done.returncode == 0, done.stderr[-6000:]
        return {"out": str(out)}
    out = Path(once_per_run(tmp_path_factory, worker_id, "clip_distributed", launch)["out"])
    return [torch.load(out / f"rank{rank}.pt", weights_only=True) for rank in range(2)]


def _single_process() -> tuple[float, dict[str, torch.Tensor]]:
    """Loss and gradients of one process on the 8 pairs the two ranks hold between them."""
    task = task_for(0, 1, 8)
    model = model_for(task)
    loss, _ = task.loss(model, batch_of(list(range(8)), [False] * 8))
    loss.backward()
    return loss.item(), {name: p.grad for name, p in model.named_parameters()}


def test_gathered_loss_and_gradients_equal_one_process_on_the_whole_batch(ranks):
    loss, grads = _single_process()
    for local, with_grad in OPTIONS:
        parts = [r[f"{local}-{with_grad}"] for r in ranks]
        assert [p["rows"] for p in parts] == [6, 3]
        if local:  # each rank its own rows (one repeat dropped: 5 and 3): the ranks' mean is the batch's loss
            assert (parts[0]["loss"] + parts[1]["loss"]) / 2 == pytest.approx(loss, rel=1e-5)
            assert parts[0]["loss"] != pytest.approx(loss, rel=1e-3)
        else:  # every rank the whole batch's loss
            assert parts[0]["loss"] == pytest.approx(loss, rel=1e-5) and parts[1]["loss"] == pytest.approx(loss, rel=1e-5)
        for name, single in grads.items():
            assert torch.equal(parts[0]["grads"][name], parts[1]["grads"][name]), name  # DDP: one gradient
            got, scale = parts[0]["grads"][name], float(single.abs().max())
            assert scale > 0, name  # every parameter has a gradient to compare
            if with_grad:  # every rank's rows get the gradient of every rank's loss terms
                assert (got - single).abs().max() <= 1e-4 * scale, (local, name, (got - single).abs().max(), scale)
            elif not local:  # open_clip without gather_with_grad: the towers' gradient reaches own rows only, so
                # averaged over 2 ranks it is halved; the temperature, in every rank's whole loss, keeps all of it
                want = single if name == "logit_scale" else single / 2
                assert (got - want).abs().max() <= 1e-4 * scale, (name, (got - want).abs().max(), scale)


def test_recall_and_loss_over_two_ranks_equal_one_process(ranks):
    task = task_for(0, 1, 8)  # 2 ranks x batch 4: the loss's blocks of 8 rows are the same
    single = task.evaluate(model_for(task))
    for rank in ranks:
        for name, value in single.items():
            assert rank["evaluate"][name] == pytest.approx(value, rel=1e-5), name
    assert 0 < single["val_i2t_r1"] < 1 and single["val_loss"] > 0  # an untrained model: something to compare
