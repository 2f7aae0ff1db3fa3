"""The error policy of a map-style data set, whose ``dataset[i]`` must return a sample.

A ``torch.utils.data.DataLoader`` asks a map-style data set for index ``i``
and collates what comes back: there is no way to drop an index (a ``None``
breaks ``default_collate``, and ``len`` is promised to the sampler). So:

- ``raise``: a ``SampleError`` naming the shard, the sample's key and why;
- ``skip`` / ``warn``: the bad sample is counted (and logged, with warn) in
  the data set's ``errors``, and the next readable sample (``i+1``, ``i+2``,
  ... wrapping round) is returned instead, so batches keep their size. The
  stand-in is the same every time ``i`` is read; ``max_errors`` bounds the
  count (per process: each DataLoader worker counts its own), and a run of
  ``MAX_STAND_INS`` bad samples in a row raises, since the data is then
  broken rather than damaged here and there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from dataio.formats.errors import SampleError
from dataio.pipeline.error_policy import DATA_EXCEPTIONS, ErrorPolicy, ErrorStats

T = TypeVar("T")
MAX_STAND_INS = 16  # bad samples in a row before a skip policy gives up on index i
_count_lock = threading.Lock()  # a data set may be read from several threads (ErrorStats is a plain list)


def read_or_stand_in(read: Callable[[int], T], error: Callable[[int, BaseException], SampleError], index: int,
                     length: int, policy: ErrorPolicy, stats: ErrorStats) -> T:
    """``read(index)``, or under skip/warn the first readable sample after it.

    ``read`` raises a data error (``DATA_EXCEPTIONS`` or a ``SampleError``)
    for a bad sample; ``error(i, exception)`` names sample ``i`` as a
    ``SampleError``. Anything else (a bug) propagates as it came.
    """
    first: SampleError | None = None
    for step in range(min(length, MAX_STAND_INS)):
        sample = (index + step) % length
        try:
            return read(sample)
        except (SampleError, *DATA_EXCEPTIONS) as e:
            named = e if isinstance(e, SampleError) else error(sample, e)
        if policy is ErrorPolicy.RAISE:
            raise named
        with _count_lock:
            stats.handle(policy, named)
        first = first or named
    tried = min(length, MAX_STAND_INS)
    raise SampleError(first.shard, first.key, f"{first.reason} (no stand-in: none of the {tried} samples from it on "
                                              "could be read)")
