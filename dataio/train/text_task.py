"""What ``dataio train`` does with token shards: loaders, a causal LM, loss and evaluation."""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

from dataio.train.models import build_text_model
from dataio.text.collate import IGNORE
from dataio.text.loader import TextLoader
from dataio.train.config import TrainConfig

Batch = dict[str, torch.Tensor]


class TextTask:
    """Next-token prediction on ``config.train``; mean token loss on ``config.val``."""

    unit = "tokens"

    def __init__(self, config: TrainConfig, device: torch.device) -> None:
        c = config
        self.config, self.device = c, device
        common = dict(mode="pack" if c.pack else "budget", max_tokens=c.max_tokens, block_size=c.block_size,
                      batch_size=c.batch_size, seed=c.seed, world_size=c.world_size, rank=c.rank, device=str(device),
                      pin_memory=device.type == "cuda", storage_options=c.storage_options)
        self.train_loader = TextLoader(c.train, profile=c.profile_steps > 0, **common)
        self.val_loader = TextLoader(c.val, shuffle=False, **common) if c.val else None
        self.vocab_size = int(self.train_loader.shards.tokenizer["vocab_size"])
        self.max_length = max(c.block_size, int(self.train_loader.shards.lengths.max()))

    def build_model(self) -> nn.Module:
        return build_text_model(self.config.model, self.vocab_size, self.max_length)

    def steps_in_epoch(self, epoch: int) -> int:
        self.train_loader.set_epoch(epoch)
        return len(self.train_loader)

    def lr_scale(self, epoch: int) -> float:
        return 1.0

    def train_batches(self) -> Iterator[Batch]:
        return iter(self.train_loader)

    @staticmethod
    def _logits(model: nn.Module, batch: Batch) -> torch.Tensor:
        positions = batch.get("position_ids")
        documents = (positions == 0).cumsum(1) if positions is not None else None  # packed: attend within a document
        return model(batch["input_ids"], positions, documents)

    def loss(self, model: nn.Module, batch: Batch) -> tuple[torch.Tensor, int]:
        logits = self._logits(model, batch)
        loss = F.cross_entropy(logits.float().flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE)
        return loss, int(batch["attention_mask"].sum())

    @torch.no_grad()
    def evaluate(self, model: nn.Module) -> dict[str, float]:
        """Mean loss per predicted token (and perplexity), padding repeats dropped, summed over ranks."""
        if self.val_loader is None:
            return {}
        model.eval()
        totals = torch.zeros(2, dtype=torch.float64, device=self.device)  # loss sum, tokens
        self.val_loader.set_epoch(0)
        for batch in self.val_loader:
            labels = batch["labels"].masked_fill(batch["repeated"][:, None], IGNORE)
            losses = F.cross_entropy(self._logits(model, batch).float().flatten(0, 1), labels.flatten(),
                                     ignore_index=IGNORE, reduction="sum")
            totals += torch.stack([losses.double(), (labels != IGNORE).sum().double()])
        if dist.is_initialized():
            dist.all_reduce(totals)
        loss = totals[0].item() / max(totals[1].item(), 1)
        model.train()
        return {"val_loss": loss, "val_ppl": math.exp(min(loss, 50))}

    def close(self) -> None:
        pass
