"""Issue 45 attack: the crop-resize's tier across process boundaries (worker processes started by fork, spawn and
forkserver after ``use_tier``) and end to end: dataio.ImageLoader over converted shards, train and eval, gives the
same batches at every tier. All held when written; the process tests pin what cpu_tier.py documents."""

from __future__ import annotations

import multiprocessing

import pytest
import torch

from dataio import ImageLoader
from dataio.images import turbo_decode

pytestmark = pytest.mark.skipif(not (turbo_decode.REGION_DECODE and turbo_decode.RESIZE_IN_C),
                                reason="the extension's crop-resize is not built or not pillow-simd's")
from dataio.formats.jpeg import cpu_tier  # noqa: E402


@pytest.fixture(autouse=True)
def process_tier_restored():
    yield
    cpu_tier.use_tier(cpu_tier.TIERS[-1])


def tier_here(_: int) -> str:
    from dataio.formats.jpeg.cpu_tier import tier_in_use

    return tier_in_use()


def test_forked_workers_inherit_the_cap_spawned_ones_start_at_the_cpus():
    """The cap is the process's: a fork copies it; spawn and forkserver start a fresh interpreter, which runs the
    CPU's highest tier (Python 3.14 makes forkserver the default on Linux: there a DataLoader's workers, or
    ddp_spawn's ranks, run the CPU's tier whatever the parent capped). Same pixels either way; only speed moves."""
    cpu_tier.use_tier("avx2")
    expected = {"fork": "avx2", "spawn": cpu_tier.cpu_tier(), "forkserver": cpu_tier.cpu_tier()}
    for method, tier in expected.items():
        with multiprocessing.get_context(method).Pool(1) as pool:
            assert pool.map(tier_here, [0]) == [tier], method


def test_image_loader_gives_the_same_batches_at_every_tier(image_shards, monkeypatch):
    calls = []
    resize = turbo_decode._jpeg_codec.resize_rgbx

    def counted(*args):
        calls.append(args[6:8])
        return resize(*args)

    monkeypatch.setattr(turbo_decode._jpeg_codec, "resize_rgbx", counted)
    for train in (True, False):
        for size in (224, 33):
            reference = None
            for tier in reversed(cpu_tier.TIERS):  # the CPU's highest first (a cap above it is the CPU's)
                cpu_tier.use_tier(tier)
                calls.clear()
                batches = [(x.clone(), y.clone()) for x, y in ImageLoader(image_shards, batch_size=8, image_size=size,
                                                                         train=train, seed=4, num_workers=2,
                                                                         decoder="turbo")]
                assert calls, "the extension's crop-resize never ran"
                if reference is None:
                    reference = batches
                    continue
                assert len(batches) == len(reference)
                for (x, y), (x0, y0) in zip(batches, reference):
                    assert torch.equal(y, y0) and torch.equal(x, x0), f"tier {tier}, train={train}, {size} px"
