"""timm's RandAugment strings in dataio against timm's own ``rand_augment_transform`` (client subprocess).

The parse: for each string, the op names, probability, magnitude, noise and clip timm builds equal the parsed
``TimmRandAugmentConfig``'s. The levels: ``timm_arguments`` equals timm's ``LEVEL_TO_ARG`` for every op, sign
and a grid of magnitudes. The draws: magnitudes with ``mstd`` (Gaussian, and uniform above 100) and the share
of applied ops match timm's over thousands of calls. The ops: each applied by dataio to a batch equals timm's
PIL op on the same argument (within PIL's uint8 rounding, and a level for warps' interpolation).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from dataio.augment.timm_randaugment import SKIPPED, TimmDraws, TimmRandAugment, timm_arguments
from dataio.augment.timm_strings import TIMM_OPS, TimmRandAugmentConfig
from dataio.formats.errors import ConfigError
from dataio.images.config import ImageLoaderConfig
from tests.clients.conftest import run_client
from tests.once_per_run import once_per_run

STRINGS = ["rand-m9-mstd0.5", "rand-m9-mstd0.5-inc1", "rand-m7-n3-p0.3", "rand-m9-mmax12-mstd101", "rand-n1-inc0",
           "rand-m10", "rand-m5-n4-mstd1-p1.0-inc1"]
MAGNITUDES = [0.0, 1.3, 2.5, 4.99, 7.0, 9.0, 9.5, 10.0, 11.0]
OP_ARGUMENTS = {"Invert": 0, "SolarizeAdd": 77, "Posterize": 2, "Solarize": 100, "Color": 1.6, "Contrast": 0.4,
                "Brightness": 1.5, "Sharpness": 0.3, "AutoContrast": 0, "Equalize": 0, "Rotate": 17.0, "ShearX": 0.2,
                "ShearY": -0.25, "TranslateXRel": 0.3, "TranslateYRel": -0.2}

TIMM_SIDE = r"""
import json, random, sys
import numpy as np
from PIL import Image
import timm.data.auto_augment as A
spec = json.load(open(sys.argv[1]))
out = {"parse": {}, "levels": {}, "draws": {}, "ops": {}}
for s in spec["strings"]:
    ra = A.rand_augment_transform(s, {})
    out["parse"][s] = {"num_ops": ra.num_layers, "weights": ra.choice_weights is not None,
                       "ops": [[o.name, o.prob, o.magnitude, o.magnitude_std, o.magnitude_max] for o in ra.ops]}
for sign in (1, -1):
    A._randomly_negate = (lambda v: v) if sign == 1 else (lambda v: -v)
    for name, fn in A.LEVEL_TO_ARG.items():
        if fn is not None:
            out["levels"][f"{name}{sign}"] = [float(fn(m, {"translate_pct": 0.45, "translate_const": 250})[0]) for m in spec["magnitudes"]]
random.seed(3)
for s in ("rand-m9-mstd0.5", "rand-m6-mstd101-p0.3", "rand-m9-mmax12-mstd4"):
    op = A.rand_augment_transform(s, {}).ops[3]  # Rotate
    seen = []
    op.level_fn = lambda m, h: (seen.append(m), (0.0,))[1]
    op.aug_fn = lambda img, *a, **k: img
    calls = 20000
    for _ in range(calls):
        op(None)
    out["draws"][s] = {"magnitudes": seen, "applied": len(seen) / calls}
image = Image.fromarray(np.load(sys.argv[2]))
for name, arg in spec["op_arguments"].items():
    fn = A.NAME_TO_OP[name]
    args = () if name in ("Invert", "AutoContrast", "Equalize") else (arg,)
    result = fn(image.copy(), *args, fillcolor=(124, 116, 104), resample=Image.BILINEAR)
    np.save(f"{sys.argv[3]}/{name}.npy", np.asarray(result))
print(json.dumps(out))
"""


def smooth_image() -> np.ndarray:
    """A (96, 112, 3) uint8 image of gradients and a bright square: warps interpolate little."""
    y, x = np.mgrid[0:96, 0:112]
    image = np.stack([x * 2, y * 2.5, (x + y) * 1.2], axis=-1)
    image[24:52, 34:70] = (230, 40, 180)
    return image.clip(0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def timm_side(client_env, tmp_path_factory, worker_id):
    """timm's side in a client process, once per run (``once_per_run``: the module's tests may land on both
    workers)."""
    def run(folder: Path) -> dict:
        spec = {"strings": STRINGS, "magnitudes": MAGNITUDES, "op_arguments": OP_ARGUMENTS}
        (folder / "spec.json").write_text(json.dumps(spec))
        (folder / "timm_side.py").write_text(TIMM_SIDE)
        np.save(folder / "image.npy", smooth_image())
        done = run_client([str(folder / "timm_side.py"), str(folder / "spec.json"), str(folder / "image.npy"),
                           str(folder)], client_env, folder)
        assert done.returncode == 0, done.stderr[-3000:]
        return {"found": json.loads(done.stdout), "folder": str(folder)}
    result = once_per_run(tmp_path_factory, worker_id, "timm_randaugment", run)
    return result["found"], Path(result["folder"])


def test_strings_parse_to_the_ops_timm_builds(timm_side):
    theirs = timm_side[0]["parse"]
    for text in STRINGS:
        config = TimmRandAugmentConfig.from_timm(text)
        timm = theirs[text]
        assert config.num_ops == timm["num_ops"] and not timm["weights"], text
        ours = [[name, config.prob, config.magnitude, config.magnitude_std, config.magnitude_max]
                for name in config.ops]
        assert ours == [[name, p, m, float("inf") if std == "Infinity" else std, mmax]
                        for name, p, m, std, mmax in timm["ops"]], text


def test_level_arguments_equal_timms(timm_side):
    levels = timm_side[0]["levels"]
    magnitudes = torch.tensor(MAGNITUDES, dtype=torch.float64)
    for name in TIMM_OPS:
        for increasing in (False, True):
            timm_name = f"{name}Increasing" if increasing and f"{name}Increasing1" in levels else name
            for sign in (1, -1):
                key = f"{timm_name}{sign}"
                if key not in levels:
                    continue  # AutoContrast, Equalize, Invert: no argument
                ours = timm_arguments(name, magnitudes, torch.full_like(magnitudes, sign), increasing)
                assert np.allclose(ours.numpy(), levels[key], atol=1e-9), (key, ours.tolist(), levels[key])


@pytest.mark.parametrize("text", ["rand-m9-mstd0.5", "rand-m6-mstd101-p0.3", "rand-m9-mmax12-mstd4"])
def test_magnitude_noise_and_op_probability_as_timms(timm_side, text):
    timm = timm_side[0]["draws"][text]
    stage = TimmRandAugment(TimmRandAugmentConfig.from_timm(text))
    draws = stage.draw(10000)
    applied = draws.ops != SKIPPED
    ours = draws.magnitude[applied].numpy()
    assert abs(applied.float().mean().item() - timm["applied"]) < 0.015
    quantiles = [0.05, 0.25, 0.5, 0.75, 0.95]
    assert np.abs(np.quantile(ours, quantiles) - np.quantile(timm["magnitudes"], quantiles)).max() < 0.25
    assert abs(ours.mean() - np.mean(timm["magnitudes"])) < 0.1
    assert ours.max() <= (12 if "mmax12" in text else 10) and ours.min() >= 0


def test_each_op_equals_timms_pil_op_on_the_same_argument(timm_side):
    folder = timm_side[1]
    image = torch.from_numpy(smooth_image()).permute(2, 0, 1)
    stage = TimmRandAugment(TimmRandAugmentConfig(fill=(124.0, 116.0, 104.0)))
    for name, argument in OP_ARGUMENTS.items():
        ours = stage._op(name, image[None].float(), torch.tensor([float(argument)], dtype=torch.float64), 96, 112)
        ours = ours[0].round().clamp(0, 255).permute(1, 2, 0).numpy()
        theirs = np.load(folder / f"{name}.npy").astype(np.float64)
        difference = np.abs(ours - theirs)
        geometric = name in ("Rotate", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel")
        # photometric: PIL rounds to uint8 after each step, dataio keeps floats: one level (two where a grey image
        # is rounded too, as tests/augment/test_augment_ops.py allows);
        # warps: PIL and grid_sample treat the border differently (tests/augment/test_augment_ops.py's bound)
        if geometric:
            assert difference.mean() < 1.0 and (difference <= 2).mean() > 0.97, (name, difference.mean())
        else:
            assert difference.max() <= (2 if name in ("Color", "Sharpness") else 1), (name, difference.max())


def test_a_batch_applies_each_samples_own_ops(timm_side):
    """The batched stage equals applying each sample's drawn ops one by one (sorting by op changes nothing)."""
    stage = TimmRandAugment(TimmRandAugmentConfig.from_timm("rand-m9-mstd0.5-inc1-n3"))
    images = torch.from_numpy(np.stack([smooth_image()] * 12)).permute(0, 3, 1, 2).contiguous()
    images[1::2] = images[1::2].flip(-1)
    draws = stage.draw(12)
    batch = stage(images, output="float", draws=draws)
    for i in range(12):
        one = TimmDraws(ops=draws.ops[i:i + 1], magnitude=draws.magnitude[i:i + 1], sign=draws.sign[i:i + 1])
        assert torch.allclose(stage(images[i:i + 1], output="float", draws=one)[0], batch[i], atol=1e-3)


@pytest.mark.parametrize("text, part", [("augmix-m5", "'augmix"), ("rand-m9-tweights", "'tweights'"),
                                        ("rand-w0", "'w0'"), ("rand-m9.5", "'m9.5'"), ("rand-x", "'x'"),
                                        ("rand-q3", "'q3'")])
def test_what_dataio_cannot_do_is_refused_in_one_line_naming_the_part(text, part):
    with pytest.raises(ConfigError) as caught:
        ImageLoaderConfig(randaugment=text)
    assert part in str(caught.value) and "\n" not in str(caught.value)
