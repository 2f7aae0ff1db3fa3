"""A user's sampler read as torch's DataLoader reads it: the indices it yields for the epoch, in its order.

``dataio.DataLoader(folder, sampler=s)`` reads exactly ``list(s)`` after
``s.set_epoch(epoch)`` (where it has one): a shuffled ``DistributedSampler``'s
own permutation, a ``WeightedRandomSampler``'s draws, Lightning's wrappers over
a weighted sampler, any sampler with ``__iter__``. dataio then computes no share
of its own (the sampler dealt it), so ranks may read uneven counts, as torch's.
A resume keeps only the epoch and the position: the order is drawn again from
the sampler for that epoch, which is the same order for a sampler seeded by its
epoch (``DistributedSampler``, ``RandomSampler`` with a generator re-seeded per
epoch) and another for one that draws from the global RNG (documented).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch.utils.data import DistributedSampler

from dataio.formats.errors import ConfigError


def sampler_indices(sampler: Any, epoch: int, size: int, where: str) -> np.ndarray:
    """The indices ``sampler`` yields for ``epoch`` (after its ``set_epoch``), checked against ``size`` samples.

    The sampler's own ``epoch`` is put back after the read: the loader reads its pass's epoch (a ``len()``
    between the loop's ``set_epoch`` and its pass, a resumed epoch) without moving the user's sampler, whose
    epoch each pass reads (``ResumableLoader._follow_sampler_epoch``), as torch's DataLoader never moves it. A
    sampler with ``set_epoch`` but no ``epoch`` attribute is not set here at all: only ``loader.set_epoch`` sets it.
    """
    set_epoch = getattr(sampler, "set_epoch", None)
    before = getattr(sampler, "epoch", None)
    if before is None:  # no epoch to read or put back: the sampler is read as the user's set_epoch left it, as torch
        set_epoch = None
    if callable(set_epoch):
        set_epoch(epoch)
    try:
        order = np.fromiter((int(i) for i in sampler), dtype=np.int64)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{{0}}={type(sampler).__name__} yields something that is not a sample index "
                          f"({error})", "sampler") from None
    finally:
        if callable(set_epoch) and before != epoch:  # a numpy integer too
            set_epoch(before)
    if len(order) and (order.min() < -size or order.max() >= size):
        bad = int(order.max()) if order.max() >= size else int(order.min())
        raise ConfigError(f"{{0}}={type(sampler).__name__} yielded index {bad}, but {where} holds {size} samples",
                          "sampler")
    return np.where(order < 0, order + size, order)


def padding_flags(sampler: Any, count: int) -> np.ndarray:
    """Which of a rank's ``count`` indices are a ``DistributedSampler``'s padding repeats (the ones past the end
    of its data set in its padded total, dealt ``rank, rank + num_replicas, ...``); none for other samplers."""
    flags = np.zeros(count, dtype=bool)
    if not isinstance(sampler, DistributedSampler) or sampler.drop_last:
        return flags
    try:
        size = len(sampler.dataset)  # type: ignore[arg-type]
    except TypeError:
        return flags
    positions = sampler.rank + np.arange(count) * sampler.num_replicas
    return positions >= size
