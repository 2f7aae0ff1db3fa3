"""The crop-resize tier a pickled ShardDataset or dataio loader carries (cpu_tier.carried_tier / take_tier).

What is carried is a cap: it lowers the tier of the process that unpickles it, and must never raise a lower one that
process chose itself (a script's top-level ``use_tier("scalar")``, then a data set unpickled from a file or a
checkpoint pickled in a process capped at avx2). Old pickles (a 4-argument ``rebuild``, a ShardDataset state
without the key) and values this build does not know leave the tier as it is.
"""

from __future__ import annotations

import copy
import pickle

import pytest

from dataio.formats.jpeg import cpu_tier
from dataio.images.turbo_decode import REGION_DECODE

pytestmark = pytest.mark.skipif(not REGION_DECODE, reason="dataio.formats.jpeg._jpeg_codec not built")
HERE_TIERS = cpu_tier.TIERS[: cpu_tier.TIERS.index(cpu_tier.cpu_tier()) + 1]  # every tier this CPU runs


def builders(image_shards):
    import dataio  # lazy: torch, for the data set and the loader only

    return (lambda: dataio.ShardDataset(image_shards, image_size=32),
            lambda: dataio.ImageLoader(image_shards, batch_size=4, image_size=32, num_workers=1))


@pytest.mark.skipif(len(HERE_TIERS) < 3, reason="needs two tiers below this CPU's")
def test_an_unpickled_cap_does_not_raise_a_lower_tier_the_process_chose(image_shards, restored_tier):
    for build in builders(image_shards):
        made = build()
        cpu_tier.use_tier("avx2")
        capped = pickle.dumps(made)
        cpu_tier.use_tier("scalar")  # this process's own, lower choice
        pickle.loads(capped).close()
        assert cpu_tier.tier_in_use() == "scalar", type(made).__name__
        made.close()


def test_old_pickles_and_unknown_values_leave_the_tier_as_it_is(image_shards, restored_tier):
    from dataio.loader.rebuilt_on_unpickle import rebuild  # lazy: torch

    lower = HERE_TIERS[-2] if len(HERE_TIERS) > 1 else HERE_TIERS[-1]
    cpu_tier.use_tier(lower)
    dataset_build, loader_build = builders(image_shards)
    dataset = dataset_build()
    state = dataset.__getstate__()
    state.pop("cpu_tier")  # a ShardDataset pickled before the key
    old = type(dataset).__new__(type(dataset))
    old.__setstate__(state)
    assert len(old) == len(dataset) and cpu_tier.tier_in_use() == lower
    loader = loader_build()
    kind, (cls, args, kwargs, moved, *_carried) = loader.__reduce__()  # + the tier and the loader's name
    kind(cls, args, kwargs, moved).close()  # a 4-argument rebuild tuple, from before the tier was carried
    for garbage in ("avx3", "", 7, ["avx2"], {"tier": "scalar"}, b"scalar", None):
        state["cpu_tier"] = garbage
        type(dataset).__new__(type(dataset)).__setstate__(state)
        rebuild(cls, args, kwargs, None, garbage).close()
        assert cpu_tier.tier_in_use() == lower, repr(garbage)
    assert copy.deepcopy(dataset) is not dataset and cpu_tier.tier_in_use() == lower
    dataset.close(), old.close(), loader.close()


def test_a_cap_above_this_cpus_is_this_cpus(restored_tier):
    cpu_tier.take_tier("vbmi")  # a pickle from a machine with more tiers than this one
    assert cpu_tier.tier_in_use() == cpu_tier.cpu_tier()


@pytest.mark.skipif(len(HERE_TIERS) < 2, reason="needs a tier below this CPU's")
def test_a_rebuild_that_fails_leaves_the_tier_the_process_ran(image_shards, restored_tier, tmp_path):
    from dataio.loader.rebuilt_on_unpickle import rebuild  # lazy: torch

    _, loader_build = builders(image_shards)
    loader = loader_build()
    _, (cls, args, kwargs, _moved, *_rest) = loader.__reduce__()
    loader.close()
    cpu_tier.use_tier(HERE_TIERS[-1])
    with pytest.raises(Exception):  # the folder is gone where it is unpickled: no loader, no cap
        rebuild(cls, (str(tmp_path / "gone"),), kwargs, None, HERE_TIERS[0])
    assert cpu_tier.tier_in_use() == HERE_TIERS[-1]
    with pytest.raises(Exception):  # a state that does not fit: the loader is not returned either
        rebuild(cls, args, kwargs, {"epoch": -1}, HERE_TIERS[0])
    assert cpu_tier.tier_in_use() == HERE_TIERS[-1]
    rebuild(cls, args, kwargs, None, HERE_TIERS[0]).close()  # a rebuild that works still takes the cap
    assert cpu_tier.tier_in_use() == HERE_TIERS[0]
