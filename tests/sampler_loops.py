"""What the tests of a loader over a user's ``sampler=`` share: the loader, its labels, and torch's order."""

from __future__ import annotations

from typing import Any

import torch

import dataio


def loader_over(shards: Any, sampler: Any) -> tuple[Any, Any]:
    """A ``ShardDataset`` over ``shards`` and a ``dataio.DataLoader`` over it with ``sampler``, labels kept as read."""
    dataset = dataio.ShardDataset(shards)
    return dataset, dataio.DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=0, normalize=False)


def labels_of(batches: Any) -> list[int]:
    """Every label of a pass (or of the rest of one)."""
    return torch.cat([labels for _, labels in batches]).tolist()


def sampler_labels(dataset: Any, sampler: Any, epoch: int) -> list[int]:
    """The labels torch's DataLoader reads over ``sampler`` at ``epoch`` (``list(sampler)`` after set_epoch)."""
    sampler.set_epoch(epoch)
    return [dataset.targets[i] for i in sampler]
