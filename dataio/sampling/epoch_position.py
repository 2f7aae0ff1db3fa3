"""Where a loader is in its run: a small stateful stage with a JSON-safe state (torchdata style).

Both loaders keep one. It counts in positions of the epoch's global order
(``dataio.sampling.partition``): ``consumed`` positions were read before this pass
(by any world size), and this rank has been dealt ``dealt`` positions of its
share since. Because shares are strided, all ranks together have then
consumed a prefix of the order, which ``consumed_now`` returns: resuming from
it on any world size reads each remaining sample once.

``begin(total)`` starts a pass and returns where it starts, ``advance(n)``
counts a batch before it is handed out (so a ``state_dict()`` taken while the
consumer holds a batch already covers it), ``end()`` moves to the next epoch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from dataio.sampling import partition
from dataio.formats.errors import ConfigError, LoaderClosed, PassInProgress
from dataio.sampling.stateful_shape import split_state, torchdata_state
from dataio.sampling.world import resolve_world


class EpochPosition:
    """Epoch and global position of a loader with ``seed`` on ``world_size`` ranks."""

    def __init__(self, *, seed: int, world_size: int, dataset: str = "") -> None:
        self.seed, self.world_size = seed, world_size
        self.dataset = dataset  # fingerprint of the data set's manifest: a state from another one is refused
        self.epoch = 0
        self.consumed = 0  # global positions read before this pass
        self.dealt = 0  # positions this rank was dealt in this pass
        self.total: int | None = None  # positions in the epoch, known once a pass begins
        self.yielded = 0  # batches this rank handed out in this epoch (torchdata's ``_num_yielded``)
        self.before = 0  # of which before this pass (a loaded state's ``_num_yielded``)
        self.saved_world: int | None = None  # the world a loaded state's ``_num_yielded`` counts batches of
        self.loaded = False  # a loaded state waits for its pass: set_epoch of its epoch keeps it

    def set_epoch(self, epoch: int) -> None:
        """The next pass yields all of ``epoch`` (as ``DistributedSampler.set_epoch``).

        After ``load_state_dict`` and before the pass begins, ``set_epoch`` of the
        loaded epoch keeps the loaded position: training loops (and Lightning)
        call it at the top of every epoch, the resumed one included.
        """
        if self.loaded and int(epoch) == self.epoch:
            return
        self.epoch = int(epoch)
        self.consumed = self.dealt = self.yielded = self.before = 0
        self.saved_world, self.loaded = None, False

    def begin(self, total: int) -> int:
        """Start a pass over an epoch of ``total`` positions; returns the positions already consumed."""
        if self.consumed > total:
            raise ValueError(f"the saved position {self.consumed} is past the epoch's {total} positions")
        self.total, self.dealt, self.loaded, self.yielded = total, 0, False, self.before
        return self.consumed

    def advance(self, positions: int) -> None:
        """Count one batch of ``positions`` handed out."""
        self.dealt += positions
        self.yielded += 1

    def end(self) -> None:
        self.epoch += 1
        self.consumed = self.dealt = self.yielded = self.before = 0
        self.saved_world = None

    def consumed_now(self) -> int:
        """Global positions consumed, by all ranks together, once each is where this rank is."""
        if self.total is None:
            return self.consumed
        return partition.consumed_after(self.total, world_size=self.world_size, consumed=self.consumed,
                                        per_rank_done=self.dealt)

    def state_dict(self) -> dict[str, int]:
        """``{"epoch", "samples_consumed", "seed", "world_size"}``: all a resume needs, on any world size."""
        state: dict[str, Any] = {"epoch": self.epoch, "samples_consumed": self.consumed_now(), "seed": self.seed,
                                 "world_size": self.world_size}
        if self.dataset:
            state["dataset"] = self.dataset
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state``: the next pass yields the rest of that epoch (any world size)."""
        check_state(state)
        if self.dataset and state.get("dataset", self.dataset) != self.dataset:
            raise ValueError(f"loader state was saved on another data set (fingerprint {state['dataset']!r}, "
                             f"this one is {self.dataset!r})")
        if state["seed"] != self.seed:
            raise ValueError(f"state was saved with seed {state['seed']}, loader has {self.seed}: "
                             "the epoch order would differ")
        if int(state["samples_consumed"]) < 0:
            raise ValueError(f"samples_consumed must be >= 0, got {state['samples_consumed']}")
        self.epoch = int(state["epoch"])
        self.consumed, self.dealt, self.total = int(state["samples_consumed"]), 0, None
        self.yielded = self.before = int(state.get("_num_yielded", 0))
        self.saved_world = int(state.get("world_size", self.world_size))
        self.loaded = True


def is_epoch(value: Any) -> bool:
    """Whether ``value`` is an epoch: an integer >= 0 (numpy's too), not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0


def checked_epoch(epoch: Any, template: str, parameter: str) -> int:
    """``epoch`` as an int, or ``ConfigError`` (``template`` names what held it): an epoch seeds the order and
    the augmentation's draws (a negative one cannot), and a float or a bool would be cut without a word."""
    if not is_epoch(epoch):
        raise ConfigError(f"{template} must be an integer >= 0, got {epoch!r} ({type(epoch).__name__})", parameter)
    return int(epoch)


def check_state(state: Any) -> None:
    """Raise ValueError saying what is wrong unless ``state`` is a loader state of the right shape and types."""
    if not isinstance(state, dict):
        raise ValueError(f"loader state must be a dict, got {type(state).__name__}")
    missing = {"epoch", "samples_consumed", "seed"} - set(state)
    if missing:
        raise ValueError(f"loader state lacks {sorted(missing)}")
    for name, least in (("epoch", 0), ("samples_consumed", 0), ("seed", None), ("world_size", 1)):
        if name not in state:
            continue
        value = state[name]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"loader state {name} must be an integer, got {value!r} ({type(value).__name__})")
        if least is not None and value < least:
            raise ValueError(f"loader state {name} must be >= {least}, got {value}")
    if "dataset" in state and not isinstance(state["dataset"], str):
        raise ValueError(f"loader state dataset must be a fingerprint string, got {state['dataset']!r}")


class ResumableLoader:
    """The epoch and resume surface both loaders expose, over their ``self.position``.

    A loader whose positions are batches rather than samples overrides
    ``_samples_at`` and ``_position_of`` to convert.
    """

    position: EpochPosition
    world_size: int
    rank: int
    _explicit_world = False  # world_size=/rank= given (or a DistributedSampler's): never replaced
    _follow: Any = None  # a DistributedSampler given as sampler=: its set_epoch is followed
    _followed_epoch: int | None = 0  # the sampler's epoch when last read (or at a load)
    _live = False  # a pass is being iterated
    _epoch_after_pass: int | None = None  # a set_epoch during a pass: taken when it ends
    _closed = False

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called (the loader reads no more)."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise LoaderClosed(f"{type(self).__name__} is closed: build a new one to read again")

    def _one_pass(self, batches: Iterator[Any]) -> Iterator[Any]:
        """``batches`` (a pass), refused while another pass of this loader is live, or after ``close()``.

        A nested pass (evaluating on the training loader mid-epoch) would move the
        outer pass's position, so a checkpoint taken in the outer pass would name
        the wrong place; it is refused in one line. A pass left early (``break``)
        ends when its iterator is dropped, and a new pass may start.
        """
        self._check_open()
        if self._live:
            raise PassInProgress(f"{type(self).__name__}: a pass over this loader is already running; a second "
                                 "iterator would move its position. Evaluate with a second loader (or "
                                 "loader.dataset), or finish the first pass")
        self._follow_world()
        self._live = True
        try:
            yield from batches
        finally:
            self._live = False
            if self._epoch_after_pass is not None:  # a set_epoch during the pass, for the next one
                self.position.set_epoch(self._epoch_after_pass)
                self._epoch_after_pass = None

    def _follow_world(self) -> None:
        """Take the world of a process group started after the loader was built.

        Lightning builds a DataModule's loaders (and Accelerate scripts their
        own) before the process group exists; torch's loaders are re-sharded
        by the framework, dataio's follow it here: before each pass and each
        question about this rank's share (``len``, ``sampler``). Never during
        a pass, and never over an explicit ``world_size``/``rank``.
        """
        if self._explicit_world or self._live:
            return
        world = self._process_world()
        if world != (self.world_size, self.rank):
            before = self.world_size
            self.world_size, self.rank = world
            self.position.world_size = world[0]
            self._world_changed(before)

    def _process_world(self) -> tuple[int, int]:
        """The world to read in when none was given: the process group's (a drop-in may read the whole set)."""
        return resolve_world(None, None)

    def _world_changed(self, before: int) -> None:
        """Check the new world (``partition.check_world``) and drop what was dealt for the old one."""

    def _follow_sampler_epoch(self) -> None:
        """At the start of a pass: read the epoch set on the user's own ``DistributedSampler``, as torch's
        DataLoader does (the same epoch twice reads the same order twice), except that a loaded state keeps its
        epoch while the sampler was not moved since the load (a fresh process's sampler says 0)."""
        epoch = self._sampler_epoch()
        if epoch is None:
            return
        epoch = checked_epoch(epoch, f"{{0}}={type(self._follow).__name__}'s epoch", "sampler")
        self._followed_epoch = epoch
        self.position.set_epoch(epoch)

    def _sampler_epoch(self) -> Any:
        """The user's sampler's epoch, as it is, that the next pass takes; None where there is none to take (no
        sampler epoch, or a loaded state waits and the sampler was not moved since the load)."""
        epoch = getattr(self._follow, "epoch", None)
        return None if epoch is None or (self.position.loaded and epoch == self._followed_epoch) else epoch

    def _next_pass_epoch(self) -> int:
        """The epoch whose order the next (or current) pass reads, without moving anything: the one
        ``_follow_sampler_epoch`` will take from the user's sampler at the pass's start (a ``len()`` between the
        loop's ``set_epoch`` and its pass reads that epoch), else the loader's own."""
        epoch = self._sampler_epoch()
        if self._live or not is_epoch(epoch):
            return self.position.epoch  # a bad epoch is named by the pass (checked_epoch), not by len()
        return int(epoch)

    @property
    def epoch(self) -> int:
        """The epoch the next (or current) pass yields (a followed sampler's, where the next pass reads it)."""
        return self._next_pass_epoch()

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose order the next pass yields (as ``DistributedSampler``); a sampler given as
        ``sampler=`` is set to it too, since each pass reads the sampler's epoch. During a pass it waits for the
        pass's end (or ``break``), as a sampler's does: the running pass keeps its position and its state."""
        epoch = checked_epoch(epoch, "{0}", "epoch")
        if callable(getattr(self._follow, "set_epoch", None)):  # first: a sampler that refuses moves neither
            self._follow.set_epoch(epoch)
            self._followed_epoch = getattr(self._follow, "epoch", None)
        if self._live:
            self._epoch_after_pass = epoch
            return
        self.position.set_epoch(epoch)

    def _samples_at(self, position: int) -> int:
        return position

    def _position_of(self, samples: int, epoch: int) -> int:
        return samples

    def state_dict(self) -> dict[str, Any]:
        """JSON-safe position in ``StatefulDataLoader``'s shape (``stateful_shape``).

        dataio's keys (epoch, samples consumed by all ranks, seed, world size,
        data set fingerprint) are what a resume reads, on any world size.
        """
        state = self.position.state_dict()
        state["samples_consumed"] = self._samples_at(state["samples_consumed"])
        return torchdata_state(state, self.position.yielded)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (either shape, any world size): the next pass yields the rest of that epoch."""
        self._check_open()
        position = split_state(state)
        if self._live:
            raise PassInProgress(f"{type(self).__name__}: load_state_dict during a pass over it; load the state "
                                 "before iterating")
        self.position.load_state_dict(position)
        self._followed_epoch = getattr(self._follow, "epoch", None)  # moved after this: the user's new epoch
        self.position.consumed = self._position_of(self.position.consumed, self.position.epoch)
