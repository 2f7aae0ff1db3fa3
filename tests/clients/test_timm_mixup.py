"""``MixConfig.from_timm(mixup_args)`` against timm's own ``Mixup`` (run in a client subprocess).

Exact: for the same lambdas, methods and boxes, timm's ``Mixup`` (its draws replaced by ours) and dataio's
``MixUpCutMix.apply`` give the same images and targets in every mode; timm's ``rand_bbox``/``rand_bbox_minmax``
and dataio's box functions give the same boxes and lambdas from the same random stream. Statistical: the
lambda distribution, CutMix share and box sizes of many draws agree.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from dataio.augment.mix import MixConfig, MixParams, MixUpCutMix, cutmix_boxes, minmax_boxes
from dataio.formats.errors import ConfigError
from tests.clients.conftest import run_client

MIXUP_ARGS = dict(mixup_alpha=0.8, cutmix_alpha=1.0, cutmix_minmax=None, prob=1.0, switch_prob=0.5, mode="batch",
                  label_smoothing=0.1, num_classes=10)  # timm train.py's dict for --mixup 0.8 --cutmix 1.0

TIMM_APPLY = r"""
import json, sys
import numpy as np, torch
import timm.data.mixup as M
spec = json.load(open(sys.argv[1]))
out, original = {}, M.cutmix_bbox_and_lam
for mode in ("elem", "pair", "batch"):
    p = spec[mode]
    lam, cut, box = np.array(p["lam"], np.float32), np.array(p["cutmix"]), np.array(p["box"])
    mix = M.Mixup(**{**spec["args"], "mode": mode})
    mix._params_per_elem = lambda n: (lam[:n].copy(), cut[:n].copy())
    mix._params_per_batch = lambda: (float(p["raw_lam"]), bool(cut[0]))
    calls = iter(np.flatnonzero(cut))
    def bbox(shape, lam_, ratio_minmax=None, correct_lam=True, count=None):
        i = next(calls)
        return tuple(int(v) for v in box[i]), float(p["lam"][i])
    M.cutmix_bbox_and_lam = bbox
    x = torch.tensor(spec["images"], dtype=torch.float32)
    y = torch.tensor(spec["labels"])
    xm, target = mix(x.clone(), y)
    out[mode] = {"images": xm.tolist(), "targets": target.tolist()}
# boxes from one random stream: timm's np.random calls, ours through an adapter drawing the same
boxes = {}
np.random.seed(5)
boxes["plain"] = [[int(v) for v in M.rand_bbox((3, 40, 56), lam)] for lam in (0.3, 0.7, 0.95)]
np.random.seed(5)
boxes["plain_lam"] = [float(original((3, 40, 56), lam, correct_lam=True)[1]) for lam in (0.3, 0.7, 0.95)]
np.random.seed(6)
boxes["minmax"] = [[int(v) for v in M.rand_bbox_minmax((3, 40, 56), (0.2, 0.8))] for _ in range(3)]
mix = M.Mixup(**{**spec["args"], "mode": "elem"})
np.random.seed(7)
lams, cuts = zip(*(mix._params_per_elem(1000) for _ in range(20)))
out["boxes"] = boxes
out["lam"] = np.concatenate(lams).tolist()
out["cut"] = np.concatenate(cuts).astype(int).tolist()
print(json.dumps(out))
"""


class LegacyStream:
    """``np.random``'s global stream behind ``Generator.integers``: dataio's box functions draw what timm's do."""

    def integers(self, low, high, size):
        return np.random.randint(low, high, size=size)


def mixed_params(mode: str, n: int, generator: np.random.Generator) -> tuple[MixParams, float]:
    """Per-sample parameters for ``mode`` with CutMix and MixUp samples, laid out as timm's modes repeat them."""
    draws = {"elem": n, "pair": n // 2, "batch": 1}[mode]
    lam = generator.uniform(0.2, 0.9, draws).astype(np.float32)
    cut = np.arange(draws) % 2 == 0 if mode != "batch" else np.array([True])
    box = np.zeros((draws, 4), np.int64)
    for i in np.flatnonzero(cut):
        y0, x0 = generator.integers(0, 8, 2)
        box[i] = (y0, y0 + 5, x0, x0 + 7)
        lam[i] = 1 - 35 / (16 * 16)
    mode_here = {"elem": "sample", "pair": "pair", "batch": "batch"}[mode]
    from dataio.augment.mix import spread
    return MixParams(lam=spread(lam, n, mode_here), cutmix=spread(cut, n, mode_here),
                     box=spread(box, n, mode_here)), float(lam[0])


def test_from_timm_mixes_and_targets_as_timm_mixup(client_env, tmp_path):
    generator = np.random.default_rng(0)
    n, labels = 6, torch.tensor([0, 3, 1, 9, 4, 3])
    images = torch.from_numpy(generator.uniform(0, 255, (n, 3, 16, 16)).astype(np.float32))
    spec, ours = {"args": MIXUP_ARGS, "images": images.tolist(), "labels": labels.tolist()}, {}
    for mode in ("elem", "pair", "batch"):
        params, raw = mixed_params(mode, n, generator)
        draws = {"elem": n, "pair": n // 2, "batch": 1}[mode]
        spec[mode] = {"lam": params.lam[:draws].tolist(), "cutmix": params.cutmix[:draws].tolist(),
                      "box": params.box[:draws].tolist(), "raw_lam": raw}
        ours[mode] = MixUpCutMix(MixConfig.from_timm({**MIXUP_ARGS, "mode": mode})).apply(images, labels, params)
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    (tmp_path / "timm_apply.py").write_text(TIMM_APPLY)
    done = run_client([str(tmp_path / "timm_apply.py"), str(tmp_path / "spec.json")], client_env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout)
    for mode, (mixed, targets) in ours.items():
        assert torch.allclose(mixed, torch.tensor(theirs[mode]["images"]), atol=1e-3), mode
        assert torch.allclose(targets, torch.tensor(theirs[mode]["targets"]), atol=1e-6), mode
    # the same boxes and corrected lambdas from the same stream (timm's rand_bbox / rand_bbox_minmax)
    np.random.seed(5)
    boxes, pasted = zip(*(cutmix_boxes(np.array([lam]), 40, 56, LegacyStream()) for lam in (0.3, 0.7, 0.95)))
    assert [list(b[0]) for b in boxes] == theirs["boxes"]["plain"]
    assert np.allclose([1 - p[0] for p in pasted], theirs["boxes"]["plain_lam"])
    np.random.seed(6)
    minmax = [list(minmax_boxes(1, (0.2, 0.8), 40, 56, LegacyStream())[0][0]) for _ in range(3)]
    assert minmax == theirs["boxes"]["minmax"]
    # lambda distribution and CutMix share of per-sample draws: timm's vs ours (20000 each)
    mix = MixUpCutMix(MixConfig.from_timm({**MIXUP_ARGS, "mode": "elem", "correct_lam": False}))
    draws = [mix.draw(1000, 224, 224) for _ in range(20)]
    lam = np.concatenate([d.lam for d in draws])
    cut = np.concatenate([d.cutmix for d in draws])
    timm_lam, timm_cut = np.array(theirs["lam"]), np.array(theirs["cut"])
    assert abs(cut.mean() - timm_cut.mean()) < 0.03
    for method in (True, False):
        ours_q = np.quantile(lam[cut == method], [0.1, 0.25, 0.5, 0.75, 0.9])
        theirs_q = np.quantile(timm_lam[timm_cut == method], [0.1, 0.25, 0.5, 0.75, 0.9])
        assert np.abs(ours_q - theirs_q).max() < 0.04, (method, ours_q, theirs_q)


def test_from_timm_takes_train_py_dict_and_timm_defaults():
    config = MixConfig.from_timm({**MIXUP_ARGS, "cutmix_minmax": [0.2, 0.8]})
    assert (config.cutmix_minmax, config.cutmix_alpha, config.mode, config.pairing) == ((0.2, 0.8), 1.0, "batch",
                                                                                          "flip")
    defaults = MixConfig.from_timm({"num_classes": 5})
    assert (defaults.mixup_alpha, defaults.cutmix_alpha, defaults.label_smoothing, defaults.mode) == (1.0, 0.0, 0.1,
                                                                                                       "batch")
    params = MixUpCutMix(config).draw(64, 40, 56)
    sides = params.box[:, 1] - params.box[:, 0]
    assert sides[params.cutmix].min() >= 8 and sides[params.cutmix].max() < 32  # int(40 * .2) .. int(40 * .8)
    assert np.allclose(params.lam[params.cutmix],
                       1 - sides[params.cutmix] * (params.box[:, 3] - params.box[:, 2])[params.cutmix] / (40 * 56))


@pytest.mark.parametrize("bad, word", [({"mode": "sample"}, "mode 'sample'"), ({"alpha": 1}, "'alpha'"),
                                       ({"cutmix_minmax": (0.9, 0.2)}, "cutmix_minmax")])
def test_from_timm_refuses_in_one_line(bad, word):
    with pytest.raises(ConfigError) as caught:
        MixConfig.from_timm({**MIXUP_ARGS, **bad})
    assert word in str(caught.value) and "\n" not in str(caught.value)
