"""What ``dataio train --task clip`` does with image-text pairs: model, contrastive loss and retrieval evaluation.

The loaders come from a factory (``PairLoaderFactory``: the run's config and device -> ``PairLoaders``;
``pair_loaders`` by default), so the task does not depend on which pair loader feeds it; the trainer drives it
as every task (``dataio.train.task.Task``: ``steps_in_epoch``, ``build_model``, ``train_batches``, ``loss``,
``evaluate``, ``train_loader.state_dict()`` in checkpoints). A batch is a dict: ``image`` ``(N, 3, S, S)``
normalised floats, ``input_ids`` and ``attention_mask`` ``(N, L)`` int64, ``sample_ids`` ``(N,)`` int64
and ``repeated`` ``(N,)`` bool (the padding repeats that even out the ranks' shares).

Training drops the repeated rows from the loss (a pair twice in one global batch would be its own
negative) and gathers every rank's features (``ClipLoss``: each rank's pairs see every rank's
negatives). Validation embeds each set whole and reports ``i2t_r1``, ``i2t_r5``, ``t2i_r1``,
``t2i_r5`` (``clip_metrics``) and ``loss``, the contrastive loss over the set in consecutive batches of
the training's global batch size, so it reads as the train loss does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import ClassVar, Literal

import torch
import torch.distributed as dist
from torch import nn

from dataio.train.clip_loss import ClipLoss
from dataio.train.clip_metrics import Embedded, block_loss_sum, caption_groups, recall_hits, recall_metrics
from dataio.train.config import TrainConfig
from dataio.train.image_task import IMAGE_OPTIONS
from dataio.train.models import check_vocab
from dataio.train.models.clip_towers import ClipModel, ClipTowers, build_clip_model
from dataio.train.pair_loaders import Batch, PairLoaderFactory, PairLoaders, pair_loaders
from dataio.train.task import TrainLoader
from dataio.train.task_choice import RunData
from dataio.train.val_sets import val_metrics

__all__ = ["ClipTask", "PairLoaders", "PairLoaderFactory"]  # the factory's types: a stand-in's (tests/train)


class ClipTask:
    """Contrastive image-text training on the pairs of ``loaders(config, device)``; recall on its val sets."""

    name: ClassVar[str] = "clip"
    kinds: ClassVar[tuple[str, ...]] = ("pairs",)
    needs: ClassVar[Mapping[str, str]] = {}
    not_auto: ClassVar[str] = ""
    model: ClassVar[Literal["image", "text"]] = "image"  # the image tower; the text tower is sized by the captions
    options: ClassVar[frozenset[str]] = IMAGE_OPTIONS | {"context_length", "tokenizer"}
    refused: ClassVar[Mapping[str, str]] = {}
    unit = "img"
    val_metrics = ("i2t_r1", "i2t_r5", "t2i_r1", "t2i_r5", "loss")  # each set's, as val_i2t_r1/NAME ... (val_sets)

    def __init__(self, config: TrainConfig, device: torch.device, loaders: PairLoaderFactory | None = None, *,
                 data: RunData | None = None, towers: ClipTowers = ClipTowers(),
                 clip_loss: ClipLoss | None = None) -> None:
        """``loaders``: the pair loaders' factory (default ``pair_loaders`` over ``data``, the run's manifests)."""
        self.config, self.device, self.towers = config, device, towers
        made = loaders(config, device) if loaders is not None else pair_loaders(config, device, data)
        self.loaders = made
        self.train_loader, self.val_loaders, self.tally = made.train, dict(made.val), made.tally
        self.clip_loss = clip_loss or ClipLoss()

    def mixture_record(self) -> dict | None:
        return self.loaders.mixture

    def tokenizer_record(self) -> dict | None:
        """The captions' tokenizer (file, sha256): a resume with another one is refused (the same ids would
        mean other words to the text tower)."""
        return self.loaders.tokenizer

    def build_model(self) -> nn.Module:
        named = self.loaders.tokenizer or {}
        check_vocab(self.loaders.vocab_size, f"the captions' tokenizer {named.get('file', '')}".rstrip())
        model = build_clip_model(self.config.model, self.loaders.vocab_size, self.loaders.context_length, self.towers)
        return model.to(memory_format=torch.channels_last) if self.config.channels_last else model

    def steps_in_epoch(self, epoch: int) -> int:
        self.train_loader.set_epoch(epoch)
        return len(self.train_loader)

    def lr_scale(self, epoch: int) -> float:
        return 1.0

    def train_batches(self) -> Iterator[Batch]:
        return iter(self.train_loader)

    def loss(self, model: nn.Module, batch: Batch) -> tuple[torch.Tensor, int]:
        """The global batch's contrastive loss (as this rank computes its part of it), and the batch's rows."""
        images, texts, scale = model(*self._inputs(batch))
        repeated = batch.get("repeated")
        if repeated is not None and bool(repeated.any()):
            keep = ~repeated.to(images.device)
            images, texts = images[keep], texts[keep]
        return self.clip_loss(images, texts, scale), len(batch["input_ids"])

    def _inputs(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The model's inputs on the run's device (a loader that delivers there already makes these no-ops)."""
        return tuple(batch[name].to(self.device, non_blocking=True)  # type: ignore[return-value]
                     for name in ("image", "input_ids", "attention_mask"))

    @torch.no_grad()
    def evaluate(self, model: nn.Module) -> dict[str, float]:
        """Recall@1/@5 both ways and the loss over each validation set (``val_sets``), all ranks together."""
        if not self.val_loaders:
            return {}
        model.eval()
        totals = {name: self._evaluate_set(model, loader) for name, loader in self.val_loaders.items()}
        model.train()
        return val_metrics(totals, recall_metrics, named=isinstance(self.config.val, dict))

    def _evaluate_set(self, model: nn.Module, loader: TrainLoader) -> list[float]:
        parts, scale = [], torch.tensor(1.0)
        loader.set_epoch(0)
        for batch in loader:
            image, input_ids, attention_mask = self._inputs(batch)
            images, texts, scale = model(image, input_ids, attention_mask)
            parts.append(Embedded(images, texts, input_ids.masked_fill(attention_mask == 0, -1),
                                  batch["sample_ids"].to(self.device), batch["repeated"].to(self.device).bool()))
        found = Embedded.concat(parts, self.towers.embed_dim, self.device).gathered().unique()
        rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
        hits = recall_hits(found.images, found.texts, caption_groups(found.input_ids), rank=rank, world=world)
        if not parts:  # this rank had no batch: its scale is the model's own
            scale = _unwrapped(model).logit_scale.detach().float().exp()
        losses = block_loss_sum(found.images, found.texts, scale.to(self.device),
                                self.config.batch_size * self.config.world_size, rank=rank, world=world)
        totals = torch.cat([hits, torch.tensor([float(len(found.images))], dtype=torch.float64, device=self.device),
                            losses])
        if dist.is_initialized():
            counted = totals[4].clone()
            dist.all_reduce(totals)
            totals[4] = counted  # the set's size: every rank holds it whole
        return totals.tolist()

    def close(self) -> None:
        self.train_loader.close()
        for loader in self.val_loaders.values():
            loader.close()


def _unwrapped(model: nn.Module) -> ClipModel:
    """The ``ClipModel`` inside DDP and ``torch.compile`` wrappers."""
    while not isinstance(model, ClipModel):
        model = getattr(model, "module", None) or getattr(model, "_orig_mod")
    return model
