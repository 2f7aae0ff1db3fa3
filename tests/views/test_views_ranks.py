"""Ranks that build ViewsLoader with different ViewsConfigs (a gloo group of two processes on 127.0.0.1)."""

from __future__ import annotations

import json
import socket

import torch.multiprocessing as mp

from tests.views import rank_worker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Class 6 (several processes): the ranks' agreement (sampling/rank_agreement.py) compares the seed, world and
# position, not the views: rank 0 with 2 local crops of 16 px and rank 1 with 3 of 24 px both run their epoch
# without a word. DINO's loss is built for one crop count (DINOLoss(ncrops) chunks the student's output by it), so
# the run mis-pairs views or trains each rank on another recipe. The ViewsConfig decides what every rank's batch is,
# as the seed does: one rank should refuse at the first pass, naming the views option that differs.
def test_ranks_that_disagree_on_the_views_are_refused(views_shards, tmp_path):
    views = [dict(global_size=32, local_size=16, local_crops=2), dict(global_size=32, local_size=24, local_crops=3)]
    mp.start_processes(rank_worker.run, args=(_free_port(), str(views_shards), views, str(tmp_path)), nprocs=2,
                       start_method="spawn")
    said = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    errors = [s["error"] for s in said if not s["ok"]]
    assert errors, f"both ranks ran with different views: {said}"
    assert any("local_crops" in e or "local_size" in e or "views" in e for e in errors), errors


# Held (the harness's control): ranks that disagree on the seed are refused at the first pass, naming the seed.
def test_control_ranks_that_disagree_on_the_seed_are_refused(views_shards, tmp_path):
    views = [dict(global_size=32, local_size=16, local_crops=2, seed=1),
             dict(global_size=32, local_size=16, local_crops=2, seed=2)]
    mp.start_processes(rank_worker.run, args=(_free_port(), str(views_shards), views, str(tmp_path)), nprocs=2,
                       start_method="spawn")
    said = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert any(not s["ok"] and "seed" in s["error"] for s in said), said
