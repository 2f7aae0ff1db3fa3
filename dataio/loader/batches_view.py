"""``loader.with_ids()``: the loader, iterated as ``ImageBatch`` (images, labels, sample ids, padding flags).

Frameworks iterate a loader themselves (Lightning's validation, test and
predict loops call ``iter(loader)``), so the sample ids and ``repeated`` flags
of ``ImageLoader.batches()`` would not reach the step that needs them to count
each sample once: in DDP the ranks' shares are padded by repetition so that
every rank runs the same number of steps (as ``DistributedSampler`` pads).
This view yields ``ImageBatch`` and forwards everything else (``len``,
``sampler``, ``batch_sampler``, ``dataset``, ``state_dict``, ...) to the loader,
so the framework sees the loader's DataLoader surface.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol


class _Loader(Protocol):
    def batches(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...


class BatchesWithIds:
    """Iterates ``loader.batches()`` (one pass per ``iter``); every other attribute is the loader's."""

    def __init__(self, loader: _Loader) -> None:
        self.loader = loader

    def __iter__(self) -> Iterator[Any]:
        return iter(self.loader.batches())

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str) -> Any:
        if name == "loader":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.loader, name)
