"""The crop-resize's CPU tier (dataio.formats.jpeg.cpu_tier): chosen per process, capped at the CPU's, and a
bad one refused by the CLI (DATAIO_CPU_TIER, bench --cpu-tier) in one line. The loader's batches at every tier:
tests/attack45/test_tier_processes.py; check_install: tests/user45 and tests/attack45's test_tier_cli.py."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from dataio.formats.errors import ConfigError
from dataio.formats.jpeg import cpu_tier
from dataio.images.turbo_decode import REGION_DECODE

pytestmark = pytest.mark.skipif(not REGION_DECODE, reason="dataio.formats.jpeg._jpeg_codec not built")
from dataio.formats.jpeg import _jpeg_codec  # noqa: E402  (after the skip mark: absent when not built)

HERE_TIERS = cpu_tier.TIERS[: cpu_tier.TIERS.index(cpu_tier.cpu_tier()) + 1]  # every tier this CPU runs


@pytest.mark.parametrize("name", HERE_TIERS)
def test_the_process_tier_is_what_resizes_without_a_simd_argument(name, restored_tier):
    rng = np.random.default_rng(3)
    pixels = rng.integers(0, 256, (301, 457, 4), dtype=np.uint8).tobytes()
    reference = np.empty((224, 224, 3), np.uint8)
    _jpeg_codec.resize_rgbx(pixels, 457, 301, (11.5, 7.25, 410.0, 290.0), reference, 224, 224, True, 0)
    assert cpu_tier.use_tier(name) == name and cpu_tier.tier_in_use() == name
    got = np.empty_like(reference)
    _jpeg_codec.resize_rgbx(pixels, 457, 301, (11.5, 7.25, 410.0, 290.0), got, 224, 224, True)
    np.testing.assert_array_equal(got, reference)
    assert name in cpu_tier.describe_tier()


def test_a_tier_above_the_cpus_is_the_cpus_and_an_unknown_one_is_refused(restored_tier):
    highest = _jpeg_codec.resize_simd()
    assert _jpeg_codec.resize_tier(99) == highest and cpu_tier.use_tier("vbmi") == cpu_tier.TIERS[highest]
    assert _jpeg_codec.resize_tier(-5) == highest  # below 0: read, not set
    with pytest.raises(ConfigError, match=r"use_tier: name must be one of scalar, avx2, avx512, vbmi \(lower case\), got 'AVX2'"):
        cpu_tier.use_tier("AVX2")


def run(args: list[str], tier: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DATAIO_CPU_TIER"}
    if tier is not None:
        env["DATAIO_CPU_TIER"] = tier
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, env=env)


def test_the_dataio_command_refuses_a_bad_tier_in_a_line_before_any_work(tmp_path):
    done = run(["-m", "dataio", "verify", str(tmp_path)], "Vbmi")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == ("dataio verify: error: DATAIO_CPU_TIER='Vbmi' is not a tier: one of scalar, "
                                   "avx2, avx512, vbmi")
    done = run(["-m", "dataio", "bench", "images", str(tmp_path), "--cpu-tier", "avx3"], None)
    assert done.returncode == 2 and "--cpu-tier: invalid choice: 'avx3'" in done.stderr


@pytest.mark.skipif(len(HERE_TIERS) < 2, reason="this CPU runs one tier: there is no cap below it to carry")
def test_a_pickled_data_set_or_loader_carries_a_cap_below_the_cpus(image_shards, restored_tier):
    """A spawned process starts at its CPU's tier; what it unpickles (a torch DataLoader worker's ShardDataset,
    ddp_spawn's loaders) sets the cap the pickling process had (cpu_tier.carried_tier / take_tier)."""
    import pickle

    import dataio

    lower = HERE_TIERS[-2]
    highest = HERE_TIERS[-1]
    for build in (lambda: dataio.ShardDataset(image_shards, image_size=32),
                  lambda: dataio.ImageLoader(image_shards, batch_size=4, image_size=32, num_workers=1)):
        made = build()
        dataio.use_tier(lower)
        capped = pickle.dumps(made)
        dataio.use_tier(highest)
        uncapped = pickle.dumps(made)
        pickle.loads(capped).close()
        assert dataio.tier_in_use() == lower, type(made).__name__
        dataio.use_tier("scalar")
        pickle.loads(uncapped).close()  # pickled at the CPU's: nothing carried, the receiving process keeps its own
        assert dataio.tier_in_use() == "scalar", type(made).__name__
        made.close()


def test_the_tier_functions_are_dataios_own_names(restored_tier):
    import dataio

    cpu_tier.use_tier("vbmi")  # the CPU's highest

    assert dataio.use_tier is cpu_tier.use_tier and dataio.tier_in_use is cpu_tier.tier_in_use
    assert dataio.cpu_tier is cpu_tier.cpu_tier and {"use_tier", "tier_in_use", "cpu_tier"} <= set(dataio.__all__)
    cpu_tier.take_tier("not a tier")  # an unknown carried value (a newer build's) leaves the tier as it is
    cpu_tier.take_tier(None)
    assert cpu_tier.tier_in_use() == cpu_tier.cpu_tier()
