"""Issue 43 attack, detection outputs: ``to_original`` on boxes as users hold them, and a rectangular size with no
bound."""

from __future__ import annotations

import subprocess
import sys
import warnings

import torch

import dataio
from dataio import DetectionConfig
from dataio.detection.map_back import to_original

ONE = dict(batch_size=2, num_workers=1)


def _letterbox_batch(coco_shards, size):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loader = dataio.DetectionLoader(coco_shards, train=False, image_size=size,
                                        targets=DetectionConfig(eval_crop="letterbox"), **ONE)
        return next(iter(loader))


def test_integer_boxes_map_back_as_float_boxes_do(coco_shards):
    # A model's or a user's boxes as int64 pixels (rounded for a log, or from an int tensor): to_original casts the
    # scale to the boxes' dtype (0.05 -> 0), divides by zero and clips: every box becomes (W, H, W, H), silently.
    batch = _letterbox_batch(coco_shards, (96, 160))
    rounded = batch["boxes"].round()
    want = to_original(rounded, batch)
    got = to_original(rounded.long(), batch)
    assert torch.allclose(got.float(), want, atol=1.0), (got[0, :2], want[0, :2])


def test_control_float_boxes_map_back_inside_the_image(coco_shards):
    batch = _letterbox_batch(coco_shards, (96, 160))
    back = to_original(batch["boxes"], batch)
    limit = batch["orig_size"].flip(-1)[:, None]
    assert bool((back[..., 2:] <= limit).all()) and bool((back[..., :2] >= 0).all())


def test_a_huge_rectangular_size_is_refused_at_construction_in_one_line(coco_shards):
    # image_size=(100000, 100000): every batch would be 2 x 3 x 10^10 floats (240 GB). Now the loader is built and
    # the first batch dies in the allocator (OSError: Cannot allocate memory, or the OOM killer) instead of a
    # ConfigError naming image_size before anything is read. Under a 4 GB address-space limit.
    code = (f"import warnings; warnings.simplefilter('ignore'); import dataio, dataio.errors\n"
            f"from dataio import DetectionConfig\n"
            f"try:\n"
            f"    l = dataio.DetectionLoader({str(coco_shards)!r}, train=False, batch_size=2, num_workers=1,\n"
            f"        image_size=(100000, 100000), targets=DetectionConfig(eval_crop='letterbox'))\n"
            f"except (dataio.errors.ConfigError, ValueError) as e:\n"
            f"    print('REFUSED', e); raise SystemExit(0)\n"
            f"next(iter(l)); print('READ')\n")
    done = subprocess.run(["prlimit", "--as=4000000000", sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "REFUSED" in done.stdout and "image_size" in done.stdout, \
        (done.returncode, done.stdout[-500:], done.stderr[-1500:])
