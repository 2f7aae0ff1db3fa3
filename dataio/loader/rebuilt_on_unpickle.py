"""A loader pickles as what it was built with (and its position), and is rebuilt where it is unpickled.

Lightning's ``ddp_spawn`` pickles the DataModule into each process it spawns, with the
loaders its ``__init__`` built; a torch DataLoader pickles as its data set and options.
A dataio loader holds decode threads, open shards and locks, none of which pickles
(``TypeError: cannot pickle '_thread.lock' object``). It pickles instead as its class,
the arguments its constructor was called with (``record_arguments``, from
``keyword_checked`` or ``SampleLoader``) and, once it has moved, its ``state_dict``:
unpickling builds a new loader in the new process, which takes that process's world (a
process group started there later is followed, as for any loader) and continues from
the position. Its transforms and hooks must pickle, as a torch DataLoader's must.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def rebuild(kind: type, args: tuple, kwargs: dict[str, Any], state: dict[str, Any] | None) -> Any:
    """``kind(*args, **kwargs)``, moved to ``state`` when it had moved."""
    loader = kind(*args, **kwargs)
    if state is not None:
        loader.load_state_dict(state)
    return loader


def record_arguments(instance: Any, constructor: Any, args: tuple, kwargs: dict[str, Any]) -> None:
    """Keep what ``instance`` was built with, when ``constructor`` is its class's own (a subclass with its own
    ``__init__`` takes other arguments: it is not recorded, and pickling it is refused)."""
    if isinstance(instance, RebuiltOnUnpickle) and type(instance).__init__ is constructor:
        instance._built_with = (args, kwargs)


class RebuiltOnUnpickle:
    """Mixed into ``SourceLoader``: ``__reduce__`` as ``rebuild(type, args, kwargs, state)``."""

    _built_with: tuple[tuple, dict[str, Any]] | None = None
    position: Any
    state_dict: Callable[[], dict[str, Any]]  # the loader's (``ResumableLoader``)

    def __reduce__(self) -> tuple[Any, tuple]:
        if self._built_with is None:
            raise TypeError(f"{type(self).__name__} cannot be pickled: it was not built by its own class's "
                            "constructor; build the loader in the process that reads it")
        args, kwargs = self._built_with
        p = self.position
        moved = p.epoch or p.consumed or p.yielded or p.loaded
        return rebuild, (type(self), args, kwargs, self.state_dict() if moved else None)
