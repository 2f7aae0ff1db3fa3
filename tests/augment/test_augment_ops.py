"""Each RandAugment op at a fixed magnitude against PIL (the reference timm's RandAugment uses).

Tolerances: the photometric ops keep floats and round once, where PIL
truncates after each op, so they may differ from PIL by 1 level (2 where a
second rounding enters: gray conversion, the sharpness filter). The affine ops
are compared with PIL's bilinear ``transform``/``rotate``: pixels can differ
where PIL and ``grid_sample`` treat the image border differently, so the test
asserts a mean absolute difference under 1 level and 97% of pixels within 2.
"""

from __future__ import annotations

import pytest
import torch
from PIL import Image, ImageEnhance, ImageOps

from dataio.augment import geometry_ops
from dataio.augment.randaugment import MAX_MAGNITUDE, OPS, geometric_maps, photometric
from tests.augment.helpers import from_pil, photo_batch, to_pil

MAG = 7.0
FACTOR = 1 + MAG / MAX_MAGNITUDE * 0.9  # enhance factor for sign +1; 1 - ... for sign -1

PIL_PHOTOMETRIC = {
    "AutoContrast": (lambda im, sign: ImageOps.autocontrast(im), 1),
    "Equalize": (lambda im, sign: ImageOps.equalize(im), 0),
    "Solarize": (lambda im, sign: ImageOps.solarize(im, 256 - MAG / MAX_MAGNITUDE * 256), 0),
    "Posterize": (lambda im, sign: ImageOps.posterize(im, int(8 - round(MAG / MAX_MAGNITUDE * 4))), 0),
    "Color": (lambda im, sign: ImageEnhance.Color(im).enhance(1 + sign * (FACTOR - 1)), 2),
    "Contrast": (lambda im, sign: ImageEnhance.Contrast(im).enhance(1 + sign * (FACTOR - 1)), 1),
    "Brightness": (lambda im, sign: ImageEnhance.Brightness(im).enhance(1 + sign * (FACTOR - 1)), 1),
    "Sharpness": (lambda im, sign: ImageEnhance.Sharpness(im).enhance(1 + sign * (FACTOR - 1)), 2),
}


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("name", sorted(PIL_PHOTOMETRIC))
def test_photometric_op_matches_pil(name: str, sign: float) -> None:
    images = photo_batch(6)
    reference, tolerance = PIL_PHOTOMETRIC[name]
    n = len(images)
    ours = photometric(name, images.float(), torch.full((n,), MAG), torch.full((n,), sign))
    ours = ours.round().clamp(0, 255).to(torch.uint8)
    for i in range(n):
        expected = from_pil(reference(to_pil(images[i]), sign))
        diff = (ours[i].int() - expected.int()).abs()
        assert diff.max() <= tolerance, f"{name} sample {i}: max diff {diff.max()} > {tolerance}"


def pil_geometric(name: str, image: Image.Image, amount: float) -> Image.Image:
    kw = {"resample": Image.BILINEAR, "fillcolor": (128, 128, 128)}
    if name == "Rotate":
        return image.rotate(amount, **kw)
    coefficients = {"ShearX": (1, amount, 0, 0, 1, 0), "ShearY": (1, 0, 0, amount, 1, 0),
                    "TranslateX": (1, 0, amount, 0, 1, 0), "TranslateY": (1, 0, 0, 0, 1, amount)}[name]
    return image.transform(image.size, Image.AFFINE, coefficients, **kw)


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("name", ["Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY"])
def test_geometric_op_matches_pil_affine(name: str, sign: float) -> None:
    images = photo_batch(4)
    n, _, height, width = images.shape
    kind = torch.full((n,), OPS.index(name) - 9)
    magnitude, signs = torch.full((n,), MAG), torch.full((n,), sign)
    maps = geometric_maps(kind, magnitude, signs, height, width)
    ours = geometry_ops.warp(images.float(), geometry_ops.forward_matrices(maps), fill=128.0)
    ours = ours.round().clamp(0, 255).to(torch.uint8)
    amount = {"Rotate": geometry_ops.rotation_degrees, "ShearX": geometry_ops.shear_factor,
              "ShearY": geometry_ops.shear_factor}.get(name)
    value = float(amount(torch.tensor(sign * MAG))) if amount else float(
        geometry_ops.translate_pixels(torch.tensor(sign * MAG), width if name == "TranslateX" else height))
    for i in range(n):
        expected = from_pil(pil_geometric(name, to_pil(images[i]), value))
        diff = (ours[i].int() - expected.int()).abs().float()
        assert diff.mean() < 1.0, f"{name}: mean diff {diff.mean():.2f}"
        assert (diff <= 2).float().mean() > 0.97, f"{name}: {(diff > 2).float().mean():.3f} of pixels off by > 2"


def test_identity_is_exact() -> None:
    from dataio.augment.randaugment import RandAugment, RandAugmentConfig

    images = photo_batch(3)
    out = RandAugment(RandAugmentConfig(ops=("Identity",), num_ops=3))(images)
    assert torch.equal(out, images)


def test_crop_resize_flip_mirrors_exactly() -> None:
    images = photo_batch(4).float()
    boxes = torch.tensor([[10.0, 5, 90, 85]] * 4)
    plain = geometry_ops.crop_resize_flip(images, boxes, torch.zeros(4, dtype=torch.bool), 48)
    mirrored = geometry_ops.crop_resize_flip(images, boxes, torch.ones(4, dtype=torch.bool), 48)
    assert plain.shape == (4, 3, 48, 48)
    torch.testing.assert_close(mirrored, plain.flip(-1), atol=1e-2, rtol=0)
    square = photo_batch(2, size=(64, 64)).float()
    whole = geometry_ops.crop_resize_flip(square, torch.tensor([[0.0, 0, 64, 64]] * 2), torch.zeros(2, dtype=torch.bool), 64)
    torch.testing.assert_close(whole, square, atol=1e-2, rtol=0)  # the whole image at its own size is the identity
