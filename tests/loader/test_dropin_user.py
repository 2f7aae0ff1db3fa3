"""dataio.DataLoader as a torchvision script uses it (dropin_user_script.py, run as a subprocess).

Validation (``shuffle=False``) gets evaluation transforms, the same on every
pass, and says so on the ``dataio`` logger; batches are float32, normalised,
NCHW, so a float model takes them; the script's own augmentation runs as
``transform=`` on the decode threads and ``batch_transform=`` on the device.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dataio import ImageLoader

SCRIPT = Path(__file__).resolve().with_name("dropin_user_script.py")


@pytest.fixture(scope="module")
def user_run(real_photo_shards, tmp_path_factory) -> tuple[str, dict, Path]:
    out = tmp_path_factory.mktemp("dropin_user")
    done = subprocess.run([sys.executable, str(SCRIPT), str(real_photo_shards), str(out)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""
    return done.stdout, json.loads((out / "summary.json").read_text()), out


def test_validation_gets_eval_transforms_every_pass_and_the_log_says_why(user_run, real_photo_shards):
    stdout, summary, out = user_run
    assert summary["val"]["train"] is False
    first, second = np.load(out / "val0.npy"), np.load(out / "val1.npy")
    np.testing.assert_array_equal(first, second)  # no random crop or flip: every validation pass the same
    with ImageLoader(real_photo_shards, batch_size=4, image_size=64, train=False, normalize=True) as reference:
        np.testing.assert_array_equal(first, next(iter(reference))[0].numpy())
    assert (f"dataio INFO dataio.DataLoader({real_photo_shards}): evaluation transforms (resize and centre crop) as "
            "it does not shuffle (pass train=True for training transforms); float32 normalised output") in stdout
    assert "training transforms (random-resized crop and flip) as it shuffles" in stdout


def test_dropin_yields_float32_normalised_nchw_and_uint8_on_request(user_run):
    _, summary, out = user_run
    assert summary["val"]["dtype"] == "torch.float32" and summary["val"]["shape"] == [4, 3, 64, 64]
    # contiguous NCHW, as torch's DataLoader stacks them (ImageLoader's default is channels_last)
    assert summary["val"]["contiguous"] and not summary["val"]["channels_last"] and summary["uint8_contiguous"]
    first = np.load(out / "val0.npy")
    assert first.min() < -1 and first.max() > 1  # (x / 255 - mean) / std, not 0..1 or 0..255
    assert summary["uint8"] == "torch.uint8"


def test_the_blitz_cnn_and_its_view_take_the_batches(user_run):
    _, summary, _ = user_run
    assert math.isfinite(summary["blitz"])  # x.view(-1, 16 * 5 * 5) on channels_last batches: a stride error


def test_own_augmentation_runs_as_transform_and_batch_transform(user_run):
    _, summary, _ = user_run
    train = summary["train"]
    assert train["train"] is True and train["dtype"] == "torch.float32" and math.isfinite(train["loss"])
    assert train["threads"] and all(name.startswith("dataio-decode") for name in train["threads"])
    assert {"transform", "batch_transform"} <= set(train["stages"])
