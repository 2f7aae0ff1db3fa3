"""Who asks a drop-in loader (``shard=None``) for a share of the set: torch's DataLoader semantics.

torch's DataLoader reads the whole set on every rank unless a sampler deals it
shares: one the user passes (``DistributedSampler``; dataio takes its world
from it, ``dataloader_args``), or one a framework injects. dataio's loaders
are not torch ``DataLoader`` objects, so Lightning does not re-create them
with its sampler, and Accelerate's ``prepare`` hands them back unchanged; the
drop-in then reads what those samplers would deal, asked here:

- Lightning: a loop of a ``Trainer`` (``lightning.pytorch.loops``) is on the
  calling stack, and the trainer injects samplers (``use_distributed_sampler``).
  ``predict`` injects ``UnrepeatedDistributedSamplerWrapper``: shares without
  padding (41 of 41 images on 2 ranks); the other stages ``DistributedSampler``
  (padded). Looked up by frame, as the loop is what asks; Lightning is never
  imported here.
- Accelerate: an ``Accelerator`` exists in the process (``accelerate_pass``):
  its prepared loaders deal every rank its batches.

Anything else (open_clip's evaluation, built on every rank and iterated on rank
0 alone) reads the whole set, and the first pass over a world > 1 says so in
one line, since earlier drop-ins took the process group's shares unasked.
"""

from __future__ import annotations

import enum
import sys
from typing import Any

from dataio.loader.accelerate_pass import accelerator_live

LOOP_MODULES = ("lightning.pytorch.loops", "pytorch_lightning.loops")
FRAMES = 80  # calling frames searched for a Lightning loop (its fetchers and combined loader sit in between)


class Request(enum.Enum):
    """What a framework asks of a drop-in's pass."""

    NONE = "none"  # nobody: the whole set, as torch's loader without a sampler
    PADDED = "padded"  # a DistributedSampler's share: padded to equal counts (Lightning fit/validate/test, Accelerate)
    UNPADDED = "unpadded"  # UnrepeatedDistributedSampler's: each sample once, counts differ by one (Lightning predict)


def share_request() -> Request:
    """The share a framework asks for here (the caller has checked that the process group has > 1 rank)."""
    trainer = _lightning_trainer(sys._getframe(1))
    if trainer is not None:
        connector = getattr(trainer, "_accelerator_connector", None)
        if not getattr(connector, "use_distributed_sampler", True):
            return Request.NONE  # Trainer(use_distributed_sampler=False): Lightning leaves torch's loaders whole
        return Request.UNPADDED if getattr(trainer, "predicting", False) else Request.PADDED
    return Request.PADDED if accelerator_live() else Request.NONE


def _lightning_trainer(frame: Any) -> Any:
    """The trainer of the nearest Lightning loop among the calling frames, or None."""
    for _ in range(FRAMES):
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if owner is not None and type(owner).__module__.startswith(LOOP_MODULES):
            trainer = getattr(owner, "trainer", None)
            if trainer is not None:
                return trainer
        frame = frame.f_back
    return None


def whole_set_line(loader: str, world_size: int, total: int, unit: str) -> str:
    """The one line a drop-in says at its first pass over a world > 1 that no sampler or framework shares."""
    return (f"{loader}: dataio.DataLoader follows torch's DataLoader: with no sampler, every rank of the {world_size} "
            f"reads all {total} {unit} of the set; for a share per rank pass sampler=DistributedSampler(dataset) "
            f"(or shard=True)")
