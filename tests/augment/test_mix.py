"""MixUp/CutMix: soft targets, the CutMix area correction, per-sample and batch modes, seeding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dataio.augment import MixConfig, MixUpCutMix, SeedKey
from dataio.augment.mix import partners


def constant_batch(n: int, size: int = 40) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample i is filled with the value 10 * i, label i."""
    images = (torch.arange(n, dtype=torch.float32) * 10).view(n, 1, 1, 1).expand(n, 3, size, size).contiguous()
    return images, torch.arange(n)


@pytest.mark.parametrize("mode", ["sample", "batch"])
@pytest.mark.parametrize("alphas", [(0.8, 0.0), (0.0, 1.0), (0.8, 1.0)])
def test_targets_are_distributions(mode: str, alphas: tuple[float, float]) -> None:
    images, labels = constant_batch(16)
    mix = MixUpCutMix(MixConfig(num_classes=20, mixup_alpha=alphas[0], cutmix_alpha=alphas[1], mode=mode,
                                label_smoothing=0.1))
    out, targets = mix(images, labels)
    assert out.shape == images.shape and targets.shape == (16, 20)
    torch.testing.assert_close(targets.sum(1), torch.ones(16))
    assert targets.min() >= 0.1 / 20 - 1e-6


def test_cutmix_lambda_is_the_pasted_fraction() -> None:
    n = 32
    images, labels = constant_batch(n)
    mix = MixUpCutMix(MixConfig(num_classes=n, mixup_alpha=0.0, cutmix_alpha=1.0, label_smoothing=0.0))
    out, targets = mix(images, labels)
    partner = partners(n)
    lams = []
    for i in range(n):
        own = (out[i] == images[i, 0, 0, 0]).float().mean()
        pasted = (out[i] == images[partner[i], 0, 0, 0]).float().mean()
        lam = targets[i, i]
        if partner[i] != i:
            torch.testing.assert_close(lam, own, atol=1e-6, rtol=0)
            torch.testing.assert_close(targets[i, partner[i]], pasted, atol=1e-6, rtol=0)
        lams.append(float(lam))
    assert len(set(round(v, 4) for v in lams)) > n // 2  # per-sample lambdas


def test_mixup_blends_each_sample_with_its_lambda() -> None:
    n = 16
    images, labels = constant_batch(n)
    out, targets = MixUpCutMix(MixConfig(num_classes=n, cutmix_alpha=0.0, label_smoothing=0.0))(images, labels)
    partner = partners(n)
    for i in range(n):
        lam = targets[i, i] if partner[i] != i else torch.tensor(1.0)
        expected = lam * images[i, 0, 0, 0] + (1 - lam) * images[partner[i], 0, 0, 0]
        torch.testing.assert_close(out[i], expected.expand_as(out[i]), atol=1e-4, rtol=0)


def test_batch_mode_uses_one_lambda() -> None:
    images, labels = constant_batch(16)
    mix = MixUpCutMix(MixConfig(num_classes=16, cutmix_alpha=0.0, mode="batch", label_smoothing=0.0))
    _, targets = mix(images, labels)
    own = targets[torch.arange(16), torch.arange(16)]
    assert torch.allclose(own, own[0].expand(16))


def test_switch_mixes_both_methods_in_one_batch() -> None:
    mix = MixUpCutMix(MixConfig(num_classes=4, switch_prob=0.5))
    params = mix.draw(256, 32, 32)
    assert 60 < params.cutmix.sum() < 196
    assert ((params.box[:, 1] - params.box[:, 0]) * (params.box[:, 3] - params.box[:, 2]) > 0)[params.cutmix].mean() > 0.9


def test_prob_zero_leaves_images_and_gives_smoothed_labels() -> None:
    images, labels = constant_batch(8)
    out, targets = MixUpCutMix(MixConfig(num_classes=8, prob=0.0, label_smoothing=0.2))(images, labels)
    assert torch.equal(out, images)
    assert torch.allclose(targets.argmax(1), labels) and torch.allclose(targets.max(1).values, torch.full((8,), 0.825))


def test_uint8_stays_uint8_and_seeding_is_deterministic() -> None:
    images = torch.randint(0, 256, (12, 3, 16, 16), dtype=torch.uint8)
    labels = torch.arange(12) % 3
    mix = MixUpCutMix(MixConfig(num_classes=3))
    mix.seed_for(SeedKey(seed=1, step=4))
    a = mix(images, labels)
    mix.seed_for(SeedKey(seed=1, step=4))
    b = mix(images, labels)
    mix.seed_for(SeedKey(seed=1, step=5))
    c = mix(images, labels)
    assert a[0].dtype == torch.uint8
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and not torch.equal(a[1], c[1])


def test_no_host_synchronisation() -> None:
    images = torch.empty(16, 3, 24, 24, device="meta")
    out, targets = MixUpCutMix(MixConfig(num_classes=5))(images, torch.zeros(16, dtype=torch.long, device="meta"))
    assert out.shape == images.shape and targets.shape == (16, 5)


def test_soft_targets_work_with_cross_entropy() -> None:
    images, labels = constant_batch(8)
    _, targets = MixUpCutMix(MixConfig(num_classes=8))(images, labels)
    logits = torch.randn(8, 8, requires_grad=True)
    torch.nn.functional.cross_entropy(logits, targets).backward()
    assert logits.grad is not None


@pytest.mark.parametrize("bad", [{"num_classes": 1}, {"mixup_alpha": 0, "cutmix_alpha": 0}, {"prob": 1.5},
                                 {"label_smoothing": 1.0}, {"mode": "elem"}])
def test_config_validation(bad: dict) -> None:
    with pytest.raises(ValueError):
        MixConfig(**{"num_classes": 10, **bad})


@pytest.mark.parametrize("pairing", ["halves", "flip"])
@pytest.mark.parametrize("n", [8, 9])
def test_pair_mode_gives_both_partners_one_draw(pairing: str, n: int) -> None:
    """``mode="pair"`` (timm's): a sample and its partner share lambda, method and box, so each pastes the
    other's pixels into the same box; an odd sample out is left unmixed."""
    mix = MixUpCutMix(MixConfig(num_classes=4, mode="pair", pairing=pairing, switch_prob=0.5))
    params = mix.draw(n, 32, 32)
    partner = partners(n, pairing).numpy()
    assert np.array_equal(params.lam, params.lam[partner]) and np.array_equal(params.box, params.box[partner])
    assert len(set(params.lam.tolist())) > 1
    alone = np.flatnonzero(partner == np.arange(n))
    assert len(alone) == n % 2 and all(params.lam[alone] == 1)
