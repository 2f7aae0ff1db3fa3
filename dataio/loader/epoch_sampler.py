"""``loader.sampler`` and ``loader.batch_sampler``: the faces of a ``DistributedSampler`` and a ``BatchSampler``
over a dataio loader's epoch.

Training scripts call ``train_loader.sampler.set_epoch(epoch)`` and sometimes
``len(train_loader.sampler)``; Lightning reads ``batch_sampler`` (whether a
loader shuffles, ``set_epoch`` of ``batch_sampler.sampler``) and DeepSpeed its
``batch_size``. dataio's order lives in the loader (seeded by epoch, dealt to
ranks), so both are views that forward to it rather than a second source of
truth. ``batch_sampler`` is not None because, as in a DataLoader with a
``batch_size``, the loader batches the samples itself (torch's None means each
item is already a batch).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import numpy as np

from dataio.formats.errors import UsageError


class _Loader(Protocol):
    epoch: int
    batch_size: int | None
    drop_last: bool

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


class SharedEpoch:
    """``loader.shared_epoch``: open_clip's ``SharedEpoch`` face (``set_value``/``get_value``) over the loader's epoch.

    open_clip's ``DataInfo.set_epoch`` moves only a ``DistributedSampler`` (by
    ``isinstance``) or a ``shared_epoch``; a resumed run (``--resume``) would
    otherwise read epoch 0's order for the epoch it resumes at. Passing
    ``DataInfo(loader, shared_epoch=loader.shared_epoch)`` makes its
    ``set_epoch(epoch)`` the loader's.
    """

    def __init__(self, loader: _Loader) -> None:
        self._loader = loader

    def set_value(self, epoch: int) -> None:
        self._loader.set_epoch(int(epoch))

    def get_value(self) -> int:
        return self._loader.epoch


class EpochBatchSampler:
    """This rank's batches of sample ids in the next (or current) pass, with ``sampler``, ``batch_size`` and
    ``drop_last`` (as ``torch.utils.data.BatchSampler``)."""

    def __init__(self, loader: _Loader, batch_ids: Callable[[], list[np.ndarray]]) -> None:
        self._loader = loader
        self._batch_ids = batch_ids

    @property
    def sampler(self) -> EpochSampler:
        return EpochSampler(self._loader)

    @property
    def batch_size(self) -> int | None:
        return self._loader.batch_size

    @property
    def drop_last(self) -> bool:
        return self._loader.drop_last

    def __len__(self) -> int:
        return len(self._batch_ids())

    def __iter__(self) -> Iterator[list[int]]:
        _refuse_rebuilt_loader(sys._getframe(1))
        return (batch.tolist() for batch in self._batch_ids())


def _refuse_rebuilt_loader(caller: Any) -> None:
    """Refuse being iterated by Accelerate's ``SkipBatchSampler``.

    ``accelerator.skip_first_batches(loader, n)`` builds a torch DataLoader
    over ``loader.dataset`` with this batch sampler behind a ``SkipBatchSampler``:
    the right sample ids, but evaluation-view images without augmentation,
    read at torch's speed. Nothing in its arguments tells the loader, so the
    sampler looks at who iterates it (the frame of the caller's ``__iter__``).
    """
    wrapper = caller.f_locals.get("self") if caller is not None else None
    kind = type(wrapper)
    if kind.__name__ == "SkipBatchSampler" and kind.__module__.startswith("accelerate"):
        raise UsageError("accelerator.skip_first_batches(loader, n) rebuilds a torch DataLoader over loader.dataset "
                         "(evaluation-view images, no augmentation, torch's speed): a dataio loader resumes with "
                         "loader.load_state_dict(state) instead (accelerator.register_for_checkpointing(loader) "
                         "saves and restores it with save_state/load_state)")
