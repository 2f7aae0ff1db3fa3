"""A dataio pass as HF Accelerate sees its own prepared DataLoaders: registered in its ``GradientState``.

``accelerator.prepare`` returns a dataio loader unchanged (it is not a torch
``DataLoader``), so Accelerate does not know where an epoch ends or how many
rows of the last gathered batch are padding. ``gather_for_metrics`` then kept
the repeats (42 for 41 validation images) and ``accumulate()`` did not sync at
the epoch's end. While an ``Accelerator`` exists in the process, each pass
registers this small object as Accelerate's own ``DataLoaderShard`` registers
itself: ``end_of_dataloader`` is set before the last batch is handed out and
``remainder`` is the count of real rows in the ranks' last batches put end to end
(the loaders then deal whole batches, ``partition.rank_share``'s ``block``, so
those rows come first and the repeats last, which is what Accelerate truncates).
Accelerate is never imported here: it is looked up among the loaded modules.
"""

from __future__ import annotations

import functools
import sys
import weakref
from typing import Any

_PREPARED: "weakref.WeakSet[Any]" = weakref.WeakSet()  # dataio loaders handed to an Accelerator's prepare()


def watch_prepare() -> None:
    """Once Accelerate is loaded, wrap ``Accelerator.prepare`` so that it records the dataio loaders handed to it.

    ``prepare`` hands a dataio loader back untouched and keeps no trace of it
    (``accelerator._dataloaders`` holds only torch DataLoaders), yet only those
    loaders are to read a share: an evaluation loader built beside them and
    iterated on the main process alone reads the whole set, as torch's. Called
    at each loader's construction and world question; a loader built before
    Accelerate was imported and prepared later is not seen (it reads the whole
    set, and its first pass says so in one line).
    """
    module = sys.modules.get("accelerate.accelerator")
    accelerator = getattr(module, "Accelerator", None)
    original = getattr(accelerator, "prepare", None)
    if original is None or getattr(original, "_dataio_watched", False):
        return

    @functools.wraps(original)
    def prepare(self: Any, *args: Any, **kwargs: Any) -> Any:
        for obj in args:
            if hasattr(type(obj), "_follow_world"):  # a dataio loader (``ResumableLoader``)
                _PREPARED.add(obj)
        return original(self, *args, **kwargs)

    prepare._dataio_watched = True  # type: ignore[attr-defined]
    accelerator.prepare = prepare  # type: ignore[union-attr]


def prepared(loader: Any) -> bool:
    """Whether ``loader`` was handed to an ``Accelerator``'s ``prepare`` in this process."""
    try:
        return loader in _PREPARED
    except TypeError:  # not weakly referable: never recorded
        return False


def accelerator_live() -> bool:
    """Whether an ``Accelerator`` (or Accelerate's ``GradientState``) was made in this process."""
    module = sys.modules.get("accelerate.state")
    gradient_state = getattr(module, "GradientState", None)
    return bool(getattr(gradient_state, "_shared_state", None))


class AcceleratePass:
    """``with AcceleratePass(batches, remainder) as p:`` around a pass; ``p.step()`` before handing out each batch.

    ``batches``: this rank's batches in the pass; ``remainder``: real rows in the last round of all ranks'
    batches (0 when nothing is padding). Without a live Accelerator it does nothing.
    """

    def __init__(self, batches: int, remainder: int) -> None:
        self.batches, self.remainder = batches, remainder
        self.end_of_dataloader = False
        self._handed = 0
        self._state: Any = None

    @property
    def live(self) -> bool:
        """Whether the pass is registered (an Accelerator exists): only then does ``step`` matter."""
        return self._state is not None

    def __enter__(self) -> "AcceleratePass":
        if accelerator_live():
            self._state = sys.modules["accelerate.state"].GradientState()
            self._state._add_dataloader(self)  # holds a weak reference: the pass holds this object
        return self

    def step(self) -> None:
        """One more batch is about to be handed out; the last one marks the end of the pass for Accelerate."""
        self._handed += 1
        self.end_of_dataloader = self._handed >= self.batches

    def __exit__(self, *exc: object) -> None:
        if self._state is not None:
            self._state._remove_dataloader(self)
            self._state = None


def last_round_rows(remaining: int, *, world_size: int, batch_size: int, padded: bool) -> int:
    """Real rows in the last round of batches dealt whole to ``world_size`` ranks (``rank_share``'s ``block``)
    over ``remaining`` positions: what Accelerate keeps of the last gathered batch; 0 when nothing is padding."""
    if not padded or world_size == 1:
        return 0
    return remaining % (world_size * batch_size)
