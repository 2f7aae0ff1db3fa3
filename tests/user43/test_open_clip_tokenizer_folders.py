"""A train and a validation folder each indexed with open_clip's own tokenizer, as docs/pairs.md says
(`dataio index DIR --tokenizer open_clip:ViT-B-32`): one tokenizer, so the same ids, yet dataio takes them for two."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clients.conftest import run_client
from tests.once_per_run import once_per_run


@pytest.fixture(scope="module")
def two_folders(pair_tars_text, client_env, tmp_path_factory, worker_id) -> tuple[Path, Path]:
    """Train and val folders, each indexed by its own CLI run (open_clip's import: ~10 s a run), once per run
    (``once_per_run``: this module's tests may land on both workers)."""
    def index(root: Path) -> dict:
        folders = []
        for name, tars in (("train", slice(0, 3)), ("val", slice(3, 5))):
            folder = root / name
            folder.mkdir(exist_ok=True)
            for tar in sorted(pair_tars_text.glob("*.tar"))[tars]:
                shutil.copy(tar, folder)
            done = run_client(["-m", "dataio", "index", str(folder), "--tokenizer", "open_clip:ViT-B-32"], client_env,
                              root)
            assert done.returncode == 0, done.stderr[-2000:]
            folders.append(str(folder))
        return {"folders": folders}
    train, val = once_per_run(tmp_path_factory, worker_id, "open_clip_ids", index)["folders"]
    return Path(train), Path(val)


def test_the_two_manifests_record_one_tokenizer(two_folders):
    train, val = (json.loads((f / "manifest.json").read_text())["options"]["tokenizer"] for f in two_folders)
    assert train["source"] == val["source"] == "open_clip:SimpleTokenizer"
    assert train["sha256"] == val["sha256"]  # differs: the fingerprint follows the captions encoded, not the tokenizer


def test_dataio_train_takes_train_and_val_indexed_with_open_clips_tokenizer(two_folders, client_env, tmp_path):
    train, val = two_folders
    done = run_client(["-m", "dataio", "train", "--task", "clip", "--train", str(train), "--val", str(val),
                       "--model", "small_cnn", "--image-size", "32", "--batch-size", "8", "--epochs", "1",
                       "--out", str(tmp_path / "run")], client_env, tmp_path, timeout=400)
    assert "ids of another tokenizer" not in done.stderr, done.stderr[-1500:]  # exit 2 today
    assert done.returncode == 0, done.stderr[-2000:]


def test_check_same_tokenizer_accepts_them(two_folders, client_env, tmp_path):
    script = ("import sys, warnings, dataio; warnings.simplefilter('error')\n"
              "a = dataio.PairLoader(sys.argv[1], batch_size=4, image_size=16, train=True)\n"
              "b = dataio.PairLoader(sys.argv[2], batch_size=4, image_size=16, train=False)\n"
              "dataio.check_same_tokenizer(a, b)\n")
    done = run_client(["-c", script, *map(str, two_folders)], client_env, tmp_path)
    assert done.returncode == 0, done.stderr[-1500:]  # UserWarning, then UsageError: "two tokenizers (open_clip:
    # SimpleTokenizer and open_clip:SimpleTokenizer)"
