"""Where a loader is in its run: a small stateful stage with a JSON-safe state (torchdata style).

Both loaders keep one: the epoch, and how many of its batches this rank has
yielded. ``begin()`` returns the batch to start from (after a resume),
``advance()`` counts a batch before it is handed out, so a ``state_dict()``
taken while the consumer holds a batch already covers it, and ``end()``
moves to the next epoch after a full pass.
"""

from __future__ import annotations


class EpochPosition:
    """Epoch and batches done of a loader with ``seed`` on ``world_size`` ranks."""

    def __init__(self, *, seed: int, world_size: int) -> None:
        self.seed, self.world_size = seed, world_size
        self.epoch = 0
        self.resume_batch = 0  # first batch of the next pass
        self.batches_done = 0

    def set_epoch(self, epoch: int) -> None:
        """The next pass yields all of ``epoch`` (as ``DistributedSampler.set_epoch``)."""
        self.epoch = int(epoch)
        self.resume_batch = 0

    def begin(self) -> int:
        self.batches_done = self.resume_batch
        return self.resume_batch

    def advance(self) -> None:
        self.batches_done += 1

    def end(self) -> None:
        self.epoch += 1
        self.resume_batch = self.batches_done = 0

    def state_dict(self) -> dict[str, int]:
        """``{"epoch", "batches_done", "seed", "world_size"}``: all a resume needs."""
        return {"epoch": self.epoch, "batches_done": self.batches_done, "seed": self.seed,
                "world_size": self.world_size}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue from ``state``: the next pass yields the rest of that epoch."""
        if state.get("seed", self.seed) != self.seed:
            raise ValueError(f"state was saved with seed {state['seed']}, loader has {self.seed}")
        if state.get("world_size", self.world_size) != self.world_size:
            raise ValueError(f"state was saved with world size {state['world_size']}, loader has "
                             f"{self.world_size}; resuming on a different world size is not supported yet")
        self.epoch = int(state["epoch"])
        self.resume_batch = self.batches_done = int(state["batches_done"])


class ResumableLoader:
    """The epoch and resume surface both loaders expose, over their ``self.position``."""

    position: EpochPosition

    @property
    def epoch(self) -> int:
        """The epoch the next (or current) pass yields."""
        return self.position.epoch

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose order the next pass yields (as ``DistributedSampler``)."""
        self.position.set_epoch(epoch)

    def state_dict(self) -> dict[str, int]:
        """Small JSON-safe position (``EpochPosition.state_dict``)."""
        return self.position.state_dict()

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue from ``state``: the next pass yields the rest of that epoch."""
        self.position.load_state_dict(state)
