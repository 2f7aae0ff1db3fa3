"""``dataio train --task clip`` on img2dataset tars, as a user runs it (subprocesses): the loss falls, retrieval
recall beats chance by a wide margin and is logged every epoch, and a run killed mid-way resumes from its
checkpoint; on photos of real size, ``dataio index`` then ``dataio train`` (captions tokenised as they are read)."""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dataio.formats.pairs.synthetic_pair_writers import write_img2dataset
from dataio.formats.pairs.synthetic_pairs import SyntheticPairsConfig, make_pair
from dataio.formats.images.wds_index import IndexConfig, index_shards
from dataio.formats.text.tokenizer_setup import TokenizerConfig

# One wording per scene (recall counts a caption's own words as the right answer), 5 colours x 2 kinds: 40 scenes
SCENES = dict(colours=5, kinds=2, max_shapes=1, templates=1)
TRAIN = SyntheticPairsConfig(count=384, samples_per_shard=128, seed=1, **SCENES)
VAL = SyntheticPairsConfig(count=96, samples_per_shard=96, seed=2, **SCENES)
EPOCHS = 6


def cli(*args: str | Path, cwd: Path, torchrun: int = 0) -> subprocess.CompletedProcess:
    prefix = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={torchrun}",
              "-m", "dataio"] if torchrun else [sys.executable, "-m", "dataio"]
    return subprocess.run(prefix + [str(a) for a in args], capture_output=True, text=True, timeout=600, cwd=cwd,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "DATAIO_NUM_WORKERS": "1"})


@pytest.fixture(scope="module")
def captioned(tmp_path_factory) -> Path:
    """img2dataset output of 384 train and 96 validation pairs, indexed with a BPE tokenizer trained on the train
    captions (the validation set with the same one)."""
    root = tmp_path_factory.mktemp("captioned")
    write_img2dataset(root / "train", TRAIN)
    write_img2dataset(root / "val", VAL)
    for name, tokenizer in (("train", TokenizerConfig(train="bpe", vocab_size=300)),
                            ("val", TokenizerConfig(path=root / "train" / "tokenizer.json"))):
        index_shards(IndexConfig(shards=(root / name,), tokenizer=tokenizer, num_workers=1, progress=False))
    return root


def chance(captions: list[str]) -> dict[str, float]:
    """Recall of a model that ranks at random: a caption query's right answers are the pictures of its caption, a
    picture's query ranks the distinct captions."""
    n, distinct = len(captions), sorted(set(captions))
    out = {f"i2t_r{k}": min(1.0, k / len(distinct)) for k in (1, 5)}
    for k in (1, 5):
        misses = [math.comb(n - captions.count(c), k) / math.comb(n, k) for c in captions]
        out[f"t2i_r{k}"] = 1 - sum(misses) / n
    return out


def test_train_clip_learns_the_pairing_logs_recall_and_resumes_after_a_kill(captioned):
    args = ("train", "--task", "clip", "--train", "train", "--val", "val", "--image-size", "32", "--batch-size", "32",
            "--epochs", str(EPOCHS), "--optimizer", "adamw", "--lr", "2e-3", "--context-length", "32", "--out", "run",
            "--progress-every", "0")
    killed = cli(*args, "--checkpoint-every", "10", "--halt-after-steps", "30", cwd=captioned)
    assert killed.returncode == 75, killed.stderr  # as if killed after step 30, the last checkpoint at step 30
    done = cli(*args, "--resume", cwd=captioned)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "resumed from step 30: epoch 3/6, 192 samples of it consumed" in done.stdout
    summary = json.loads((captioned / "run" / "log.json").read_text())["summary"]
    rows = list(csv.DictReader(open(captioned / "run" / "log.csv")))
    steps = [float(r["loss"]) for r in rows if r["lr"]]
    epochs = [r for r in rows if r["val_i2t_r1"]]
    assert len(steps) == EPOCHS * 12 and len(epochs) == EPOCHS  # every step once across the kill
    assert all(r["val_i2t_r5"] and r["val_t2i_r1"] and r["val_t2i_r5"] for r in epochs)  # recall in log.csv
    assert sum(steps[-12:]) / 12 < 0.5 * sum(steps[:3]) / 3, steps  # the last epoch's loss against the first steps'
    floor = chance([make_pair(i, VAL).caption for i in range(VAL.count)])
    for name, random in floor.items():  # e.g. i2t_r1 0.43 against 0.03
        assert summary[f"val_{name}"] > min(0.9, 5 * random), (name, summary[f"val_{name}"], random)
    print(f"\nCLIP recall on {VAL.count} val pairs (chance {floor}): " +
          " ".join(f"{k}={v:.3f}" for k, v in summary.items() if k.startswith("val_")))


def test_index_then_train_clip_on_photos_of_real_size(real_pair_tars, pair_tars, tmp_path):
    shutil.copytree(real_pair_tars, tmp_path / "photos")
    shutil.copy(pair_tars / "tokenizer.json", tmp_path / "tokenizer.json")  # the user's own tokenizer
    done = cli("index", "photos", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "indexed 20 image-text pairs in 3 tars" in done.stdout
    done = cli("train", "--train", "photos", "--val", "photos", "--tokenizer", "tokenizer.json", "--image-size", "64",
               "--batch-size", "8", "--epochs", "1", "--out", "run", "--progress-every", "0", cwd=tmp_path, torchrun=2)
    assert done.returncode == 0 and done.stderr == "", done.stderr  # auto: clip, captions tokenised as read
    # two ranks (torchrun, gloo): rank 0's log, 10 of the 20 pairs in 2 steps of 8 and 2
    summary = json.loads((tmp_path / "run" / "log.json").read_text())["summary"]
    assert summary["steps"] == 2 and summary["samples"] == 10 and 0 <= summary["val_i2t_r1"] <= 1 and summary["val_t2i_r5"] > 0, summary
    assert (tmp_path / "run" / "checkpoint.pt").is_file()
