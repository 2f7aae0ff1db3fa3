"""Batched RandomErasing and ColorJitter against timm's ``RandomErasing`` and torchvision's ``ColorJitter``.

Erasing: with the same seed, dataio's host draws (``erasing_boxes`` through ``random.Random``) erase the same
boxes of the same samples as timm's ``RandomErasing`` does with its module-level ``random``; ``const`` batches
are equal, ``rand``/``pixel`` ones are erased in the same pixels. Jitter: for drawn orders and factors, dataio's
batch equals torchvision's PIL ``adjust_brightness``/``adjust_contrast``/``adjust_saturation`` applied in each
sample's order (PIL truncates each step as dataio does; its rounded grey image can add up to 3 levels), and the factors drawn have ``get_params``' ranges.
Both are reachable from the loader's options (``re_prob``, ``re_mode``, ``re_count``, ``color_jitter``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

import dataio
from dataio.augment.color_jitter import ColorJitter, ColorJitterConfig, JitterDraws
from dataio.augment.random_erasing import ErasingConfig, RandomErasing, erasing_boxes
from dataio.formats.errors import ConfigError
from tests.clients.conftest import run_client
from tests.once_per_run import once_per_run

TIMM_SIDE = r"""
import json, random, sys
import numpy as np, torch
from PIL import Image
from timm.data.random_erasing import RandomErasing
import torchvision.transforms as T
import torchvision.transforms.functional as F
spec = json.load(open(sys.argv[1]))
out = {}
for mode in ("const", "rand", "pixel"):
    random.seed(spec["seed"])
    x = torch.ones(16, 3, 20, 24)
    RandomErasing(0.6, mode=mode, max_count=3, device="cpu")(x)
    out[mode] = x.tolist()
images = np.load(sys.argv[2])
adjust = [F.adjust_brightness, F.adjust_contrast, F.adjust_saturation]
jittered = []
for image, order, factors in zip(images, spec["order"], spec["factors"], strict=True):
    pil = Image.fromarray(image)
    for index in order:
        if index < 3:
            pil = adjust[index](pil, factors[index])
    jittered.append(np.asarray(pil))
np.save(sys.argv[3], np.stack(jittered))
torch.manual_seed(0)
params = [T.ColorJitter.get_params([0.6, 1.4], [0.6, 1.4], [0.6, 1.4], None) for _ in range(4000)]
out["factors"] = [[float(b), float(c), float(s)] for _, b, c, s, _ in params]
out["first"] = [int(order[0]) for order, *_ in params]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def jitter_case():
    generator = torch.Generator().manual_seed(1)
    images = torch.randint(20, 236, (10, 3, 24, 28), generator=generator, dtype=torch.uint8)
    images[:, :, 6:14, 8:20] = torch.tensor([200, 30, 90], dtype=torch.uint8).view(1, 3, 1, 1)
    stage = ColorJitter(ColorJitterConfig.from_timm(0.4))
    return images, stage.draw(len(images))


@pytest.fixture(scope="module")
def timm_side(client_env, tmp_path_factory, worker_id, jitter_case):
    """timm's side in a client process, once per run (``once_per_run``: the module's tests may land on both
    workers)."""
    def run(folder: Path) -> dict:
        images, draws = jitter_case
        np.save(folder / "images.npy", images.permute(0, 2, 3, 1).numpy())
        spec = {"seed": 11, "order": draws.order.tolist(), "factors": draws.factors.tolist()}
        (folder / "spec.json").write_text(json.dumps(spec))
        (folder / "timm_side.py").write_text(TIMM_SIDE)
        done = run_client([str(folder / "timm_side.py"), str(folder / "spec.json"), str(folder / "images.npy"),
                           str(folder / "jittered.npy")], client_env, folder)
        assert done.returncode == 0, done.stderr[-3000:]
        return {"found": json.loads(done.stdout), "jittered": str(folder / "jittered.npy")}
    result = once_per_run(tmp_path_factory, worker_id, "timm_erasing_jitter", run)
    return result["found"], np.load(result["jittered"])


@pytest.mark.parametrize("mode", ["const", "rand", "pixel"])
def test_erasing_erases_what_timms_random_erasing_erases(timm_side, mode):
    config = ErasingConfig(probability=0.6, mode=mode, max_count=3)
    boxes = erasing_boxes(config, 16, 20, 24, random.Random(11))
    ours = RandomErasing(config)(torch.ones(16, 3, 20, 24), boxes)
    theirs = torch.tensor(timm_side[0][mode])
    assert torch.equal(ours != 1, theirs != 1)  # the same pixels of the same samples
    assert 0 < (ours != 1).flatten(1).any(1).sum() < 16
    if mode == "const":
        assert torch.equal(ours, theirs)
    if mode == "rand":  # one value per channel and box: fewer distinct values than pixels
        erased = ours[ours != 1]
        assert len(erased.unique()) <= 16 * 3 * 3


def test_colour_jitter_equals_torchvisions_pil_adjustments_in_each_samples_order(timm_side, jitter_case):
    images, draws = jitter_case
    ours = ColorJitter(ColorJitterConfig.from_timm(0.4))(images.clone(), draws)
    ours = ours.round().clamp(0, 255).permute(0, 2, 3, 1).numpy()
    difference = np.abs(ours - timm_side[1].astype(np.float64))
    # PIL rounds its grey image (saturation) too, which a following contrast or brightness amplifies
    assert difference.max() <= 3 and difference.mean() < 0.1, (difference.max(), difference.mean())
    assert len({tuple(order) for order in draws.order.tolist()}) > 3  # samples go in their own orders


def test_colour_jitter_draws_get_params_ranges(timm_side):
    theirs = np.array(timm_side[0]["factors"])
    ours = ColorJitter(ColorJitterConfig.from_timm(0.4)).draw(4000)
    assert ours.factors.min() >= 0.6 and ours.factors.max() <= 1.4
    assert np.abs(np.quantile(ours.factors.numpy(), [0.1, 0.5, 0.9], axis=0)
                  - np.quantile(theirs, [0.1, 0.5, 0.9], axis=0)).max() < 0.04
    first = np.bincount(ours.order[:, 0].numpy(), minlength=4) / 4000
    theirs_first = np.bincount(timm_side[0]["first"], minlength=4) / 4000
    assert np.abs(first - theirs_first).max() < 0.04  # every adjustment first a quarter of the time


def test_erasing_and_jitter_are_loader_options(coloured_shards):
    plain = dict(batch_size=8, image_size=32, normalize=True, seed=3, num_workers=1)
    base, _ = next(iter(dataio.ImageLoader(coloured_shards, **plain)))
    erased, _ = next(iter(dataio.ImageLoader(coloured_shards, **plain, re_prob=1.0, re_mode="const", re_count=2)))
    assert ((erased == 0) & (base != 0)).flatten(1).any(1).all()  # every sample has an erased box
    loader = dataio.ImageLoader(coloured_shards, **plain, color_jitter=(0.8, 0.0, 0.0))
    jittered, _ = next(iter(loader))
    assert not torch.allclose(jittered, base)
    with pytest.raises(ConfigError, match="re_prob"):
        dataio.ImageLoader(coloured_shards, batch_size=8, re_prob=0.25)  # uint8 output: nothing normalised to erase
    with pytest.raises(ConfigError, match="hue"):
        dataio.ImageLoader(coloured_shards, batch_size=8, color_jitter=(0.4, 0.4, 0.4, 0.1), normalize=True)
