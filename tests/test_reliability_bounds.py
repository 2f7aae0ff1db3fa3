"""The loaders' mixture numbers, extreme but valid or out of range (issue 33), as a user meets them: a weight of
1e-30 hung the epoch's blend for ever, a weight of 0 was an IndexError, weights of 1e308 a numpy warning and
"every source has weight 0"; ``epoch_length=1e20`` was numpy's "Maximum allowed dimension exceeded" and
``2**40`` a MemoryError."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dataio import ImageLoader, TextLoader
from dataio.formats.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import json, sys
from dataio import ImageLoader, TextLoader
text, images = sys.argv[1], sys.argv[2]
out = {}
for name, weights in (("tiny", {"a": 1, "b": 1e-30}), ("zero", {"a": 1, "b": 0}), ("huge", {"a": 1e308, "b": 1e308}),
                      ("anneal", [(0, {"a": 1, "b": 1}), (40, {"a": 1, "b": 1e-300})])):
    loaders = (TextLoader({"a": text, "b": text}, mode="fixed", batch_size=16, weights=weights, seed=0),
               ImageLoader({"a": images, "b": images}, batch_size=8, image_size=32, weights=weights, seed=0))
    for kind, loader in zip(("text", "images"), loaders):
        for batch in loader:
            pass
        out[f"{kind} {name}"] = {source: counts["samples"] for source, counts in loader.stats.sources.items()}
        loader.close()
print(json.dumps(out))
"""


def test_loaders_read_an_epoch_with_tiny_zero_or_huge_weights(text_shards, coloured_shards):
    done = subprocess.run(["timeout", "-s", "KILL", "120", sys.executable, "-W", "error::RuntimeWarning", "-c", SCRIPT,
                           str(text_shards), str(coloured_shards)], capture_output=True, text=True, timeout=150,
                          cwd=ROOT)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    counts = json.loads(done.stdout)
    text = TextLoader(text_shards, mode="fixed", batch_size=16)
    texts, images = len(text.shards), len(ImageLoader(coloured_shards, batch_size=8, image_size=32).dataset)
    text.close()
    for kind, size in (("text", texts), ("images", images)):  # an epoch is one pass of every source: 2 x size
        assert counts[f"{kind} tiny"] == {"a": 2 * size}
        assert counts[f"{kind} zero"] == {"a": 2 * size}
        assert counts[f"{kind} huge"] == {"a": size, "b": size}
        assert 0 < counts[f"{kind} anneal"]["b"] <= 40 and sum(counts[f"{kind} anneal"].values()) == 2 * size


@pytest.mark.parametrize("kind", ["text", "images"])
def test_epoch_length_and_breakpoints_out_of_range_name_the_parameter(kind, text_shards, coloured_shards):
    def make(**options):
        if kind == "text":
            return TextLoader({"a": text_shards, "b": text_shards}, mode="fixed", batch_size=16, **options)
        return ImageLoader({"a": coloured_shards, "b": coloured_shards}, batch_size=8, image_size=32, **options)

    blend = {"a": 1, "b": 1}
    for length in (10**20, 1e20, 2**40, 2**31 + 1, 0, 2.5, True, "10"):
        with pytest.raises(ConfigError) as refused:
            make(weights=blend, epoch_length=length)
        assert refused.value.parameters == ("epoch_length",)
        assert str(refused.value).startswith("epoch_length must be >= 1 and at most 2,147,483,648")
    for far in (9 * 10**18, 9e18, 10**30, float("inf")):
        with pytest.raises(ConfigError) as refused:
            make(weights=[(0, blend), (far, {"a": 1, "b": 0})])
        assert refused.value.parameters == ("weights",)
        assert str(refused.value).startswith("weights: a breakpoint's position must be an integer in 0..")
    loader = make(weights=blend, epoch_length=10)  # in range: as before
    assert sum(len(b["sample_ids"] if kind == "text" else b[1]) for b in loader) == 10
    loader.close()
