"""``python -m dataio.bench.tier_floors`` (issue 45) at a toy size: every tier this CPU runs, train and eval, each
stage over the Huffman floor (a subprocess: only the CLI imports ``dataio.bench`` in-process)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dataio.formats.jpeg import cpu_tier
from dataio.images.turbo_decode import REGION_DECODE

pytestmark = pytest.mark.skipif(not REGION_DECODE, reason="dataio.formats.jpeg._jpeg_codec not built")


def test_the_tier_floors_cover_every_tier_and_mode(image_shards, tmp_path):
    out = tmp_path / "floors.json"
    done = subprocess.run([sys.executable, "-m", "dataio.bench.tier_floors", str(image_shards), "--count", "6",
                           "--rounds", "1", "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(out.read_text())
    tiers = cpu_tier.TIERS[: cpu_tier.TIERS.index(cpu_tier.cpu_tier()) + 1]
    assert sorted(found) == sorted(f"{image_shards.name} {mode} {t}" for mode in ("train", "eval") for t in tiers)
    for key, figures in found.items():
        assert figures["huffman"] > 0 and figures["decode"] > figures["huffman"] and figures["resize"] > 0, key
        assert f"{key:24s} huffman" in done.stdout

