"""How a plan cuts its input: item counts, fingerprints and the plan record, without an engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dataio.formats.plan.plan_sizing import ITEM_BYTES, choose_items
from dataio.formats.plan.work_plan import WorkPlan, plan_fingerprint
from dataio.formats.text.tokenizer_setup import TokenizerConfig


@pytest.mark.parametrize("total, units, cpus, requested, expected", [
    (10, 30, 2, None, 4),                 # tiny input: 2 items per CPU
    (10 * ITEM_BYTES, 10**6, 2, None, 10),  # by bytes
    (10, 3, 8, None, 3),                  # never more items than units
    (10, 30, 2, 7, 7), (10, 5, 2, 70, 5),  # asked for, at most the units
    (0, 0, 4, None, 1),                   # nothing to cut: one item
])
def test_items_by_bytes_and_cpus_never_more_than_units(total, units, cpus, requested, expected):
    assert choose_items(total, units, cpus, requested) == expected


def test_zero_items_asked_is_refused():
    with pytest.raises(ValueError, match="items must be >= 1"):
        choose_items(10, 10, 1, 0)


class Opaque:
    """An object whose repr holds its address (as a user's tokenizer object's does)."""


def test_the_fingerprint_is_stable_across_runs_and_follows_options_input_and_items():
    sizes = np.array([3, 4, 5])
    config = TokenizerConfig(path=Path("tok.json"))
    base = plan_fingerprint("images", config, 2, sizes, ["a", "b", "c"])
    assert plan_fingerprint("images", TokenizerConfig(path=Path("tok.json")), 2, sizes.copy(), ["a", "b", "c"]) == base
    assert plan_fingerprint("images", {"t": Opaque()}, 2, sizes, []) == plan_fingerprint("images", {"t": Opaque()}, 2,
                                                                                          sizes, [])
    assert plan_fingerprint("images", config, 3, sizes, ["a", "b", "c"]) != base
    assert plan_fingerprint("images", config, 2, np.array([3, 4, 6]), ["a", "b", "c"]) != base
    assert plan_fingerprint("images", config, 2, sizes, ["a", "b", "d"]) != base
    assert plan_fingerprint("images", TokenizerConfig(path=Path("other.json")), 2, sizes, ["a", "b", "c"]) != base


def test_item_names_are_the_rank_folders_merge_reads_and_urls_are_remote():
    plan = WorkPlan(kind="images", config=None, out="s3://bucket/out", items=12, fingerprint="f" * 64)
    assert plan.remote and plan.item_name(3) == "rank-00003-of-00012"
    assert not WorkPlan(kind="text", config=None, out="out", items=1, fingerprint="0").remote
    with pytest.raises(ValueError, match="kind must be one of"):
        WorkPlan(kind="video", config=None, out="out", items=1, fingerprint="0")
