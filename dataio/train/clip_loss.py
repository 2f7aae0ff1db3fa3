"""The symmetric contrastive (InfoNCE) loss of CLIP, over every rank's pairs: open_clip's ``ClipLoss``.

Each image's caption is its positive and every other caption in the global batch, all ranks together,
a negative; the same for each caption, and the loss is the mean of the two cross-entropies. Features are
gathered across ranks (``dataio.train.gather``, row counts may differ) and the two options keep
open_clip's meaning:

- ``gather_with_grad`` (default on): the gathered features carry gradients back to the rank that made
  them, so with DDP's gradient averaging a step's gradient is that of the single-process loss on the
  concatenated batch. Off, only a rank's own rows get gradients (from its own loss): the gradient is
  then smaller by the world size with ``local_loss=False``, and misses other ranks' terms with
  ``local_loss=True``, as in open_clip.
- ``local_loss`` (default on): each rank computes the rows of its own pairs against everyone's
  (``n x N`` logits instead of ``N x N``), weighted so that the ranks' mean is the loss of the global
  batch (with equal row counts: each rank's own mean, as open_clip). Off, every rank computes the whole
  ``N x N`` loss, the same value on every rank.

Features come L2-normalised; ``logit_scale`` is the (already exponentiated) temperature.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.nn import functional as F

from dataio.train.gather import distributed, gather_rows


class ClipLoss:
    """``loss(image_features, text_features, logit_scale)``: the contrastive loss of the global batch."""

    def __init__(self, *, local_loss: bool = True, gather_with_grad: bool = True) -> None:
        self.local_loss, self.gather_with_grad = local_loss, gather_with_grad

    def __call__(self, image_features: torch.Tensor, text_features: torch.Tensor,
                 logit_scale: torch.Tensor) -> torch.Tensor:
        # float32 logits under AMP too: at a temperature of 100, bf16's 3 significant digits move a logit by ~0.4
        with torch.autocast(image_features.device.type, enabled=False):
            return self._loss(image_features.float(), text_features.float(), logit_scale.float())

    def _loss(self, image_features: torch.Tensor, text_features: torch.Tensor,
              logit_scale: torch.Tensor) -> torch.Tensor:
        if not distributed():
            return pair_loss(image_features, text_features, logit_scale)
        both = torch.cat([image_features, text_features], dim=1)  # one collective for the two towers
        gathered, counts = gather_rows(both, with_grad=self.gather_with_grad,
                                       keep_own=not self.local_loss and not self.gather_with_grad)
        all_images, all_texts = gathered.split([image_features.shape[1], text_features.shape[1]], dim=1)
        if not self.local_loss:
            return pair_loss(all_images, all_texts, logit_scale)
        rank, total = dist.get_rank(), sum(counts)
        labels = torch.arange(len(image_features), device=image_features.device) + sum(counts[:rank])
        per_image = F.cross_entropy(logit_scale * image_features @ all_texts.T, labels, reduction="sum")
        per_text = F.cross_entropy(logit_scale * text_features @ all_images.T, labels, reduction="sum")
        # the ranks' mean, which DDP's gradient averaging takes, is the global batch's mean loss
        return (per_image + per_text) / 2 * (len(counts) / max(total, 1))


def pair_loss(image_features: torch.Tensor, text_features: torch.Tensor, logit_scale: torch.Tensor) -> torch.Tensor:
    """The symmetric loss of one batch: pair ``i`` is row ``i`` of both feature matrices."""
    logits = logit_scale * image_features @ text_features.T
    labels = torch.arange(len(logits), device=logits.device)
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
