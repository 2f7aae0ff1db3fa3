"""open_clip's ``--resume`` over dataio, with docs/pairs.md's edit of ``get_data``: the resumed run reads the epoch
it resumes at, as an uninterrupted run does (open_clip's ``DataInfo.set_epoch`` moves its own samplers and
webdataset's shared epoch; a dataio loader in ``DataInfo(loader)`` is moved by neither)."""

from __future__ import annotations

from pathlib import Path

from tests.clients.open_clip_runs import run_epochs


def test_a_resumed_run_reads_the_epoch_it_resumes_at(open_clip_one_rank, patched, pair_tars_text, client_env,
                                                     tmp_path):
    # the uninterrupted run is the session's one run on one rank (tests/clients/test_open_clip_main.py checks its
    # evaluation): 2 epochs, a checkpoint after each; its epoch_1.pt is the interrupted run's checkpoint
    whole = open_clip_one_rank
    assert whole["epochs"] == [0, 1]
    checkpoint = Path(whole["checkpoints"]) / "epoch_1.pt"
    # open_clip logs "=> resuming checkpoint ... (epoch 1)" and trains its epoch 1 on the loader's epoch 0 again:
    # the same order and crops as the first epoch, where the uninterrupted run read epoch 1's
    resumed = run_epochs(patched, pair_tars_text, tmp_path / "resumed", client_env, "--epochs", "2", "--resume",
                         str(checkpoint))
    assert resumed["epochs"] == [1]
    assert "=> resuming checkpoint" in resumed["log"] and "(epoch 1)" in resumed["log"]
