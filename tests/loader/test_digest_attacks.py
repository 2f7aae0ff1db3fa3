"""The epoch digest on 3 gloo ranks under torchrun, with patterns users write (controls: these hold now):
``set_epoch`` never called over 3 epochs (one loader, a weighted mixture), and a rank that breaks out of its
pass after one batch (named on every rank, no hang)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def ranks(shards: Path, out: Path, case: str, world: int = 3) -> list[dict]:
    out.mkdir()
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(world),
               str(HERE / "digest_attack_script.py"), str(shards), str(out), case]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=HERE.parents[1], env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]


@pytest.mark.parametrize("case", ["no_set_epoch", "mixture_epochs"])
def test_control_three_epochs_without_set_epoch_prove_themselves_on_3_ranks(coloured_shards, tmp_path, case):
    for record in ranks(coloured_shards, tmp_path / "out", case):
        assert record.get("r") == [{"ok": True}] * 3, record


def test_control_a_rank_breaking_out_early_is_named_on_every_rank(coloured_shards, tmp_path):
    records = ranks(coloured_shards, tmp_path / "out", "break_early")
    errors = {record["r"][0].get("error") for record in records}
    assert len(errors) == 1 and "never read (planned on rank 2)" in errors.pop(), records
