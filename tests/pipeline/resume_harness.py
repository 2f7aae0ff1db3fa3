"""One resume harness for every kind of sample: save a loader's state mid-epoch, load it into a new loader, and
compare what it reads with an uninterrupted pass.

A kind passes when, on the same world, the resumed loader reads exactly the batches the uninterrupted one would
have read from that point (every field equal, tensor for tensor: the crops, flips, colours and views are drawn from
the batch's key, never from what was read before), and, on another world size, every sample of the epoch is read
once, before or after the resume. ``make(world_size, rank)`` builds a loader of the kind; ``ids(batch)`` gives a
batch's sample ids with padding repeats left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

Make = Callable[[int, int], Any]
Ids = Callable[[Any], list[int]]


def same(a: Any, b: Any) -> None:
    """Two batches equal field by field: tensors, lists, tuples and dicts of them."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (sorted(a), sorted(b))
        for name in a:
            same(a[name], b[name])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            same(x, y)
    else:
        assert a == b


def check_exact_resume(make: Make, *, epoch: int = 1, before: int = 2) -> None:
    """On one rank: the batches after a mid-epoch ``state_dict`` equal the uninterrupted pass's, field by field."""
    whole = make(1, 0)
    whole.set_epoch(epoch)
    expected = list(whole)
    assert len(expected) > before, "the epoch must be longer than the part read before the resume"
    interrupted = make(1, 0)
    interrupted.set_epoch(epoch)
    iterator = iter(interrupted)
    for _ in range(before):
        next(iterator)
    state = interrupted.state_dict()
    resumed = make(1, 0)
    resumed.load_state_dict(state)
    rest = list(resumed)
    for a, b in zip(expected[before:], rest, strict=True):
        same(a, b)
    for closing in (whole, interrupted, resumed):
        closing.close()


def check_elastic_resume(make: Make, ids: Ids, count: int, *, before_world: int, after_world: int,
                         before: int = 2) -> None:
    """Read ``before`` batches on each of ``before_world`` ranks, resume on ``after_world`` ranks: each of the
    epoch's ``count`` samples once, before or after (the same world: exactly the uninterrupted ranks' batches)."""
    ranks = [make(before_world, rank) for rank in range(before_world)]
    iterators = [iter(loader) for loader in ranks]
    read = Counter(i for it in iterators for _ in range(before) for i in ids(next(it)))
    state = ranks[0].state_dict()
    rest: list[list[list[int]]] = []
    for rank in range(after_world):
        resumed = make(after_world, rank)
        resumed.load_state_dict(state)
        rest.append([ids(batch) for batch in resumed])
        resumed.close()
    if before_world == after_world:
        for it, mine in zip(iterators, rest, strict=True):
            assert [ids(batch) for batch in it] == mine
    remaining = Counter(i for batches in rest for batch in batches for i in batch)
    assert set(read) | set(remaining) == set(range(count)), "every sample read, before or after the resume"
    assert not set(read) & set(remaining) and sum(read.values()) + sum(remaining.values()) == count, "each once"
    for loader in ranks:
        loader.close()
