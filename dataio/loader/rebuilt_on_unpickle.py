"""A loader pickles as what it was built with (and its position), and is rebuilt where it is unpickled.

Lightning's ``ddp_spawn`` pickles the DataModule into each process it spawns, with the
loaders its ``__init__`` built; a torch DataLoader pickles as its data set and options.
A dataio loader holds decode threads, open shards and locks, none of which pickles
(``TypeError: cannot pickle '_thread.lock' object``). It pickles instead as its class,
the arguments its constructor was called with (``record_arguments``, from
``keyword_checked`` or ``SampleLoader``) and, once it has moved, its ``state_dict``:
unpickling builds a new loader in the new process, which takes that process's world (a
process group started there later is followed, as for any loader) and continues from
the position (pickled mid-pass: after the last batch handed out, as a checkpoint would).
``copy.copy`` and ``copy.deepcopy`` go the same way: a second loader over the same data.

Its transforms and hooks must pickle, as a torch DataLoader's must for its workers; one
that does not is named in one line (``NotPicklable``) rather than by the pickler's
message, which names neither the loader nor the keyword. A closed loader is refused
(``LoaderClosed``): it reads no more, and a copy that reads would be a surprise.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import pickle
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dataio.formats.errors import LoaderClosed, NotPicklable
from dataio.formats.jpeg.cpu_tier import TIERS, carried_tier, take_tier, tier_in_use, use_tier
from dataio.formats.remote.storage import redact

_checking = threading.local()  # set while ``_check_pickles`` runs in this thread
ADVICE = ("define it at module level (or as a picklable callable object), as torch's DataLoader needs for its "
          "workers, or build the loader in the process that reads it (Lightning: in setup() or train_dataloader())")


def rebuild(kind: type, args: tuple, kwargs: dict[str, Any], state: dict[str, Any] | None,
            tier: str | None = None, built_as: str = "", follow: tuple[Any, bool] | None = None) -> Any:
    """``kind(*args, **kwargs)``, moved to ``state`` when it had moved, in a process capped at the crop-resize
    ``tier`` its pickling process was capped at (``cpu_tier.carried_tier``: a spawned process starts at its CPU's),
    named in its notes as it was built (``built_as``: ``dataio.DataLoader`` for the drop-in's loaders, which a
    ``ddp_spawn`` rank would otherwise call ``ImageLoader(shard=None)``, a constructor the script never called).
    ``follow``: a loader over a ``sampler=`` with an epoch, the sampler's epoch it last read and whether its position
    was a resume's (loaded, or mid-pass): the copy then reads the epoch the original would read next."""
    before, returned = tier_in_use(), _capped_returns[0]
    take_tier(tier)
    taken = tier_in_use()
    try:
        loader = kind(*args, **kwargs)
        if built_as:
            loader._built_as = built_as
        if state is not None:
            loader.load_state_dict(state)
            if follow is not None:  # not a resume: the original's next pass reads the sampler's epoch, as torch's
                loader._followed_epoch, loader.position.loaded = follow
    except BaseException:  # no loader: the process keeps the tier it ran (a cap is the loader's, not the failure's)
        # unless another thread set one since, or returned a loader carrying a cap meanwhile (it may be this one)
        if before in TIERS and tier_in_use() == taken != before and _capped_returns[0] == returned:
            use_tier(before)
        raise
    if tier in TIERS:
        _capped_returns[0] += 1
    return loader


_capped_returns = [0]  # rebuilds that returned a loader carrying a cap: a failing one then keeps the tier


def record_arguments(instance: Any, constructor: Any, args: tuple, kwargs: dict[str, Any]) -> None:
    """Keep what ``instance`` was built with, when ``constructor`` is its class's own (a subclass with its own
    ``__init__`` takes other arguments: it is not recorded, and pickling it is refused)."""
    if isinstance(instance, RebuiltOnUnpickle) and type(instance).__init__ is constructor:
        source = (_absolute(args[0]),) if args else ()
        kept = {k: _absolute(v) if k == "source" else v for k, v in kwargs.items()}
        instance._built_with = (source + tuple(args[1:]), kept)


def _absolute(source: Any) -> Any:
    """A source folder as the absolute path it was opened at (a mixture's each): a relative one, rebuilt in a
    process with another working folder (a spawned rank, a job's other cwd), read another data set there."""
    if isinstance(source, dict):
        return {name: _absolute(value) for name, value in source.items()}
    if isinstance(source, (str, os.PathLike)) and "://" not in os.fspath(source):
        path = Path(os.fspath(source))
        if not path.is_absolute():
            absolute = path.absolute()
            return absolute if isinstance(source, os.PathLike) else str(absolute)
    return source


class RebuiltOnUnpickle:
    """Mixed into ``SourceLoader``: ``__reduce__`` as ``rebuild(type, args, kwargs, state)``."""

    _built_with: tuple[tuple, dict[str, Any]] | None = None
    _closed: bool
    _live: bool
    _followed_epoch: Any  # the sampler's epoch last read (``ResumableLoader``)
    position: Any
    state_dict: Callable[[], dict[str, Any]]  # the loader's (``ResumableLoader``)
    _describe: Callable[[], str]

    def _rebuilt_with(self, **changes: Any) -> None:
        """A setting changed after construction (``TextLoader.set_weights``) is rebuilt with the loader."""
        if self._built_with is not None:
            self._built_with = (self._built_with[0], {**self._built_with[1], **changes})

    def __reduce__(self) -> tuple[Any, tuple]:
        name = f"{type(self).__name__}({redact(self._describe())})"
        if self._closed:
            raise LoaderClosed(f"{name} is closed: it cannot be pickled (a closed loader reads no more); pickle it "
                               "before close(), or build a new one")
        if self._built_with is None:
            raise NotPicklable(f"{name} cannot be pickled: {type(self).__name__} has a constructor of its own, whose "
                               "arguments dataio does not know; build the loader in the process that reads it")
        args, kwargs = self._built_with
        _check_pickles(name, type(self).__init__, args, kwargs)
        p = self.position
        moved = p.epoch or p.consumed or p.dealt or p.yielded or p.loaded
        sampler = getattr(self, "_follow", None)
        follow = (self._followed_epoch, bool(p.loaded or self._live)) if hasattr(sampler, "epoch") else None
        return rebuild, (type(self), args, kwargs, self.state_dict() if moved else None, carried_tier(),
                         getattr(self, "_built_as", ""), follow)


def _check_pickles(name: str, constructor: Any, args: tuple, kwargs: dict[str, Any]) -> None:
    """Raise ``NotPicklable`` naming the first argument (or config field) that does not pickle.

    The arguments are pickled once here, on their own (paths, configs and hooks: small), so that a lambda or a
    closure is named by its keyword; the pickler's own error names neither the loader nor the keyword.
    """
    if getattr(_checking, "active", False):  # a hook bound to what holds the loader (a DataModule's method): the
        return  # check in progress meets the loader again; checked once, it would recurse without end
    _checking.active = True
    try:
        _find_unpicklable(name, constructor, args, kwargs)
    finally:
        _checking.active = False


def _find_unpicklable(name: str, constructor: Any, args: tuple, kwargs: dict[str, Any]) -> None:
    try:
        pickle.dumps((args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        return
    except Exception:  # noqa: BLE001 (any failure is diagnosed below, then named in one line)
        pass
    positional = [p for p in inspect.signature(constructor).parameters if p != "self"]
    named = {**dict(zip(positional, args)), **kwargs}  # args: the first of the positional parameters
    for keyword, value in named.items():
        for where, part in _parts(keyword, value):
            try:
                pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as e:  # noqa: BLE001 (pickle raises PicklingError, TypeError or AttributeError)
                reason = str(e).splitlines()[0] if str(e) else type(e).__name__
                what = getattr(part, "__qualname__", type(part).__name__)
                what = "" if what in reason else f" ({what})"  # a local function's message names it already
                raise NotPicklable(f"{name} cannot be pickled: its {where}={what} does not pickle ({reason}); "
                                   f"{ADVICE}") from None
    pickle.dumps((args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)  # each part pickles, the whole did not: as it is


def _parts(keyword: str, value: Any) -> list[tuple[str, Any]]:
    """``value``'s fields when it is a config (a hook given in ``config=`` is named ``config.transform``), then
    ``value`` itself."""
    fields = dataclasses.fields(value) if dataclasses.is_dataclass(value) and not isinstance(value, type) else ()
    return [(f"{keyword}.{f.name}", getattr(value, f.name)) for f in fields] + [(keyword, value)]
