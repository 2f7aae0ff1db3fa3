"""What ``dataio train`` does with token shards: loaders, a causal LM, loss and evaluation."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Literal

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

from dataio.train.models import build_text_model, check_vocab
from dataio.text.collate import IGNORE
from dataio.text.loader import TextLoader
from dataio.train.config import TrainConfig
from dataio.train.mixture_counts import PlanTally
from dataio.train.mixture_schedule import RunUnits
from dataio.train.set_options import train_options, val_options
from dataio.train.task_choice import RunData
from dataio.train.val_sets import val_metrics, val_sets

Batch = dict[str, torch.Tensor]


class TextTask:
    """Next-token prediction on ``config.train`` (a folder, or a mixture); mean token loss on ``config.val``."""

    name: ClassVar[str] = "lm"
    kinds: ClassVar[tuple[str, ...]] = ("tokens",)
    needs: ClassVar[Mapping[str, str]] = {}
    not_auto: ClassVar[str] = ""
    model: ClassVar[Literal["image", "text"]] = "text"
    options: ClassVar[frozenset[str]] = frozenset({"max_tokens", "block_size", "pack"})
    refused: ClassVar[Mapping[str, str]] = {}
    unit = "tokens"
    val_metrics = ("loss", "ppl")  # each validation set's, as val_loss/NAME ... (val_sets)

    def __init__(self, config: TrainConfig, device: torch.device, *, data: RunData | None = None) -> None:
        """``data`` is not read: the loader knows its documents and tokenizer (a mixture's schedule is placed in its
        units once it has opened, ``_train_loader``)."""
        c = config
        self.config, self.device = c, device
        common: dict[str, Any] = dict(
            mode="pack" if c.pack else "budget", max_tokens=c.max_tokens, block_size=c.block_size,
            batch_size=c.batch_size, seed=c.seed, world_size=c.world_size, rank=c.rank, device=str(device),
            pin_memory=device.type == "cuda")
        self.train_loader = self._train_loader(common)
        options = val_options(c)  # each set's own (set_options)
        self.val_loaders = {name: TextLoader(folder, shuffle=False, storage_options=options[name], **common)
                            for name, folder in val_sets(c.val).items()}
        self.vocab_size = int(self.train_loader.shards.tokenizer["vocab_size"])
        self.max_length = max(c.block_size, int(self.train_loader.shards.lengths.max()))
        self.tally = PlanTally(self.train_loader, c.world_size) if c.mixture else None

    def tokenizer_record(self) -> dict | None:
        """The documents' tokenizer as their manifest records it (file, sha256): a resume must find it unchanged."""
        record = self.train_loader.shards.tokenizer
        return {"file": str(record.get("file")), "sha256": str(record["sha256"])} if record.get("sha256") else None

    def _train_loader(self, common: dict[str, Any]) -> TextLoader:
        """One folder, or a mixture. A schedule in fractions of training (or steps) is placed once the loader knows
        an epoch's length in its units: it starts with equal weights (every source drawn, whatever the epoch
        rule) and is given the placed schedule before its first batch (``TextLoader.set_weights``)."""
        c = self.config
        options: dict[str, Any] = dict(profile=c.profile_steps > 0, storage_options=train_options(c), **common)
        if not c.mixture:
            return TextLoader(c.train, **options)
        options.update(epoch_length=c.epoch_length, epoch_until=c.epoch_until)
        if c.weights.constant:
            return TextLoader(c.train, weights=c.weights.first_blend(), **options)
        loader = TextLoader(c.train, weights={name: 1.0 for name in c.weights.names}, **options)
        loader.set_weights(c.weights.resolve(self.run_units(loader)))
        return loader

    def run_units(self, loader: TextLoader) -> RunUnits:
        """The planned run in the loader's units: batches in budget mode (a step takes one per rank), documents
        when packing (a step's rows hold ``rows x block_size / mean length`` of them, on average)."""
        c = self.config
        assert loader.mixture is not None
        if c.pack:
            per_step = c.world_size * c.batch_size * c.block_size / float(loader.shards.lengths.mean())
            return RunUnits(epochs=c.epochs, epoch_units=loader.mixture.plan.rule.samples, per_step=per_step,
                            unit="documents")
        return RunUnits(epochs=c.epochs, epoch_units=loader.mixture.plan.rule.samples, per_step=c.world_size,
                        unit="batches")

    def mixture_record(self) -> dict | None:
        """What a resume must find unchanged: the sources' names, the placed schedule and the epoch rule."""
        if not self.config.mixture:
            return None
        loader_config = self.train_loader.config
        schedule = loader_config.weights
        return {"sources": list(schedule.names), "points": [[p, list(w)] for p, w in schedule.points],
                "interpolation": schedule.interpolation, "unit": "documents" if self.config.pack else "batches",
                "epoch_length": loader_config.epoch_length, "epoch_until": loader_config.epoch_until}

    def build_model(self) -> nn.Module:
        check_vocab(self.vocab_size, f"the tokenizer of {self.config.train}")  # named before the shapes' memory
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
        """Mean loss per predicted token (and perplexity) over each validation set (``val_sets``), padding
        repeats dropped, summed over ranks; all sets together weigh each set by its tokens."""
        if not self.val_loaders:
            return {}
        model.eval()
        totals = {name: self._evaluate_set(model, loader) for name, loader in self.val_loaders.items()}
        model.train()
        return val_metrics(totals, _loss_and_perplexity, named=isinstance(self.config.val, dict))

    def _evaluate_set(self, model: nn.Module, loader: TextLoader) -> list[float]:
        totals = torch.zeros(2, dtype=torch.float64, device=self.device)  # loss sum, tokens
        loader.set_epoch(0)
        for batch in loader:
            labels = batch["labels"].masked_fill(batch["repeated"][:, None], IGNORE)
            losses = F.cross_entropy(self._logits(model, batch).float().flatten(0, 1), labels.flatten(),
                                     ignore_index=IGNORE, reduction="sum")
            totals += torch.stack([losses.double(), (labels != IGNORE).sum().double()])
        if dist.is_initialized():
            dist.all_reduce(totals)
        return totals.tolist()

    def close(self) -> None:
        pass


def _loss_and_perplexity(totals: list[float]) -> dict[str, float]:
    loss = totals[0] / max(totals[1], 1)
    return {"loss": loss, "ppl": math.exp(min(loss, 50))}
