"""Who asks a drop-in loader (``shard=None``) for a share of the set: torch's DataLoader semantics.

torch's DataLoader reads the whole set on every rank unless a sampler deals it
shares: one the user passes (``DistributedSampler``; dataio takes its world
from it, ``dataloader_args``), or one a framework injects. dataio's loaders
are not torch ``DataLoader`` objects, so Lightning does not re-create them
with its sampler, and Accelerate's ``prepare`` hands them back unchanged; the
drop-in then reads what those samplers would deal, asked here:

- Lightning: a loop of a ``Trainer`` (``lightning.pytorch.loops``) is on the
  calling stack, THIS loader is one of the iterables of one of its loops'
  combined loaders (``_combined_loader.flattened``: what a ``*_dataloader``
  hook or ``fit(..., datamodule)`` gave it), and the trainer injects samplers
  (``use_distributed_sampler``). ``predict`` injects
  ``UnrepeatedDistributedSamplerWrapper``: shares without padding (41 of 41
  images on 2 ranks); the other stages ``DistributedSampler`` (padded). A
  module's own loader iterated in a hook on rank 0 is not Lightning's: whole.
  Lightning is never imported here.
- Accelerate: THIS loader was handed to ``accelerator.prepare``
  (``accelerate_pass.watch_prepare`` records it): its prepared loaders deal
  every rank its batches. An evaluation loader it never saw reads the whole set.

Anything else (open_clip's evaluation, built on every rank and iterated on rank
0 alone) reads the whole set, and the first pass over a world > 1 says so in
one line, since earlier drop-ins took the process group's shares unasked.
"""

from __future__ import annotations

import enum
import sys
from typing import Any

from dataio.loader.accelerate_pass import accelerator_live, prepared, watch_prepare

LOOP_MODULES = ("lightning.pytorch.loops", "pytorch_lightning.loops")
FRAMES = 80  # calling frames searched for a Lightning loop (its fetchers and combined loader sit in between)


class Request(enum.Enum):
    """What a framework asks of a drop-in's pass."""

    NONE = "none"  # nobody: the whole set, as torch's loader without a sampler
    PADDED = "padded"  # a DistributedSampler's share: padded to equal counts (Lightning fit/validate/test, Accelerate)
    UNPADDED = "unpadded"  # UnrepeatedDistributedSampler's: each sample once, counts differ by one (Lightning predict)


def share_request(loader: Any) -> Request:
    """The share a framework asks of ``loader`` here (the caller has checked that the process group has > 1
    rank)."""
    trainer = _lightning_trainer(sys._getframe(1))
    if trainer is not None and _given_to(trainer, loader):
        connector = getattr(trainer, "_accelerator_connector", None)
        if not getattr(connector, "use_distributed_sampler", True):
            return Request.NONE  # Trainer(use_distributed_sampler=False): Lightning leaves torch's loaders whole
        return Request.UNPADDED if getattr(trainer, "predicting", False) else Request.PADDED
    watch_prepare()
    return Request.PADDED if accelerator_live() and prepared(loader) else Request.NONE


def _given_to(trainer: Any, loader: Any) -> bool:
    """Whether ``loader`` is one of the iterables of the trainer's loops (fit, its validation, validate, test,
    predict), as Lightning holds them once a stage has requested its loaders."""
    fit = getattr(trainer, "fit_loop", None)
    loops = [fit, getattr(getattr(fit, "epoch_loop", None), "val_loop", None),
             *(getattr(trainer, name, None) for name in ("validate_loop", "test_loop", "predict_loop"))]
    for loop in loops:
        combined = getattr(loop, "_combined_loader", None)
        if any(_unwrapped(given) is loader for given in getattr(combined, "flattened", None) or ()):
            return True
    return False


def _unwrapped(given: Any) -> Any:
    """The loader under a view that forwards to it (``loader.with_ids()``: ``BatchesWithIds.loader``)."""
    for _ in range(4):  # views of views, a few deep at most
        inner = getattr(given, "__dict__", {}).get("loader")  # the instance's own, never a forwarded attribute
        if inner is None:
            return given
        given = inner
    return given


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


def whole_set_line(loader: str, face: str, world_size: int, total: int, unit: str) -> str:
    """The one line a drop-in says at its first pass over a world > 1 that no sampler or framework shares
    (``face``: the constructor used, ``dataio.DataLoader`` or a kind's ``shard=None``)."""
    return (f"{loader}: {face} follows torch's DataLoader: with no sampler, every rank of the {world_size} "
            f"reads all {total} {unit} of the set; for a share per rank pass sampler=DistributedSampler(dataset) "
            f"(or shard=True)")
