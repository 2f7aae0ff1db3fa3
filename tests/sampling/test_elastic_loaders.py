"""Loader-level resumption in one process: ranks simulated by loaders with explicit rank arguments."""

from __future__ import annotations

import json

import pytest

from dataio import ImageLoader, TextLoader
from tests.conftest import NUM_COLOURED


def image_ranks(shards, world_size: int, state: dict | None = None, **options) -> list[ImageLoader]:
    loaders = [ImageLoader(shards, batch_size=4, image_size=16, num_workers=1, seed=2, world_size=world_size,
                           rank=r, **options) for r in range(world_size)]
    for loader in loaders:
        if state:
            loader.load_state_dict(state)
    return loaders


def read(loaders, steps: int | None = None) -> tuple[list[int], dict]:
    """Every rank reads ``steps`` batches (all, if None) in lock step; returns real sample ids and rank 0's state."""
    seen, states = [], []
    for loader in loaders:
        for step, batch in enumerate(loader.batches()):
            seen += batch.samples[~batch.repeated].tolist()
            if steps is not None and step + 1 == steps:
                break
        states.append(json.loads(json.dumps(loader.state_dict())))
    assert all(state == states[0] for state in states), "ranks disagree on the position"
    return seen, states[0]


@pytest.mark.parametrize("before, after", [(4, 2), (2, 3), (3, 1), (1, 4)])
def test_image_loader_resumes_on_another_world_size(coloured_shards, before, after):
    first, state = read(image_ranks(coloured_shards, before), steps=2)
    assert state["samples_consumed"] == before * 8 and state["world_size"] == before
    rest, end = read(image_ranks(coloured_shards, after, state))
    assert sorted(first + rest) == list(range(NUM_COLOURED))
    position = {k: end[k] for k in ("epoch", "samples_consumed", "seed", "world_size")}
    assert position == {"epoch": 1, "samples_consumed": 0, "seed": 2, "world_size": after}
    assert end["dataset"] == state["dataset"]


def test_padding_repeats_are_flagged_and_batches_are_equal(coloured_shards):
    loaders = image_ranks(coloured_shards, 4)  # 45 samples over 4 ranks: 3 repeats
    counts, repeats = [], 0
    for loader in loaders:
        batches = list(loader.batches())
        counts.append(len(batches))
        repeats += sum(int(b.repeated.sum()) for b in batches)
        assert all(len(b.images) == len(b.labels) == len(b.samples) for b in batches)
    assert len(set(counts)) == 1 and repeats == 3


def test_drop_last_drops_and_an_empty_world_is_an_error(coloured_shards):
    seen, _ = read(image_ranks(coloured_shards, 2, drop_last=True))
    assert len(seen) == len(set(seen)) == 40  # 45 // (2 ranks x 4) x 8
    with pytest.raises(ValueError, match="no data"):
        ImageLoader(coloured_shards, batch_size=4, world_size=16, rank=0, drop_last=True)
    with pytest.raises(ValueError, match="both"):
        ImageLoader(coloured_shards, world_size=2)


@pytest.mark.parametrize("mode", ["budget", "pack"])
def test_text_loader_resumes_on_another_world_size(text_shards, mode):
    def ranks(world_size, state=None):
        loaders = [TextLoader(text_shards, mode=mode, max_tokens=600, block_size=64, batch_size=2, seed=3,
                              world_size=world_size, rank=r) for r in range(world_size)]
        for loader in loaders:
            if state:
                loader.load_state_dict(state)
        return loaders

    def tokens_read(loaders, steps=None):
        total, states = 0, []
        for loader in loaders:
            for step, batch in enumerate(loader):
                total += int(batch["attention_mask"][~batch["repeated"]].sum())
                if steps is not None and step + 1 == steps:
                    break
            states.append(loader.state_dict())
        assert all(s == states[0] for s in states)
        return total, states[0]

    first, state = tokens_read(ranks(4), steps=2)
    rest, _ = tokens_read(ranks(3, state))
    whole, _ = tokens_read(ranks(1))
    assert first + rest == whole == int(ranks(1)[0].shards.lengths.sum())


def test_text_state_off_a_batch_boundary_is_refused(text_shards):
    loader = TextLoader(text_shards, mode="budget", max_tokens=600, seed=3)
    boundaries = set(loader.global_plan()[1].offsets.tolist())
    off = next(v for v in range(max(boundaries)) if v not in boundaries)
    with pytest.raises(ValueError, match="batch boundary"):
        loader.load_state_dict({"epoch": 0, "samples_consumed": off, "seed": 3, "world_size": 2})


@pytest.mark.parametrize("before, after", [(2, 1), (1, 3), (4, 2)])
def test_len_after_an_elastic_load_is_the_new_worlds_epoch(coloured_shards, text_shards, before, after):
    """Lightning caches ``len(loader)`` for the epochs after a resume: with the old world's batches counted (5 read
    on 2 ranks, 15 left on 1: len 20 of 25) every later epoch stopped short. A new-user report (issue 41)."""
    _, state = read(image_ranks(coloured_shards, before), steps=2)
    full = [len(loader) for loader in image_ranks(coloured_shards, after)]
    resumed = image_ranks(coloured_shards, after, state)
    lengths = [len(loader) for loader in resumed]
    rest = [len(list(loader.batches())) for loader in resumed]
    for length, whole, left in zip(lengths, full, rest, strict=True):  # a framework counting the 2 old batches
        assert length >= whole and length >= 2 + left  # ends neither this epoch nor the next ones short
    assert [len(loader) for loader in resumed] == full  # the next epochs: this world's
    texts = [TextLoader(text_shards, mode="fixed", batch_size=4, seed=1, world_size=before, rank=r)
             for r in range(before)]
    for loader in texts:
        it = iter(loader)
        next(it), next(it)
    state = texts[0].state_dict()
    full = len(TextLoader(text_shards, mode="fixed", batch_size=4, seed=1, world_size=after, rank=0))
    resumed_text = TextLoader(text_shards, mode="fixed", batch_size=4, seed=1, world_size=after, rank=0)
    resumed_text.load_state_dict(state)
    assert len(resumed_text) >= full
