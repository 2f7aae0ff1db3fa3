"""``loader.sampler``: the face of a ``DistributedSampler`` over a dataio loader's epoch.

Training scripts call ``train_loader.sampler.set_epoch(epoch)`` and sometimes
``len(train_loader.sampler)``; dataio's order lives in the loader (seeded by
epoch, dealt to ranks), so the sampler is a view that forwards to it rather
than a second source of truth.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np


class _Loader(Protocol):
    epoch: int

    def set_epoch(self, epoch: int) -> None: ...

    def sample_ids(self) -> np.ndarray: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class EpochSampler:
    """``set_epoch``, ``len`` and iteration over this rank's sample ids of the next (or current) pass."""

    def __init__(self, loader: _Loader) -> None:
        self._loader = loader

    @property
    def epoch(self) -> int:
        return self._loader.epoch

    def set_epoch(self, epoch: int) -> None:
        """The loader's next pass yields ``epoch`` (as ``DistributedSampler.set_epoch``)."""
        self._loader.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self._loader.sample_ids())

    def __iter__(self) -> Iterator[int]:
        return iter(self._loader.sample_ids().tolist())

    def state_dict(self) -> dict[str, Any]:
        return self._loader.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._loader.load_state_dict(state)
