"""A small CLIP: an image tower and a text tower projecting to one width, and a learnable temperature.

The image tower is one of the image models (``IMAGE_MODELS``: ``small_cnn``, ``resnet18``,
``resnet50``) whose classifier head, sized to ``embed_dim``, is the projection. The text tower embeds
tokens and positions, runs a few bidirectional transformer blocks (``small_gpt``'s block, given a
mask: every token attends to the caption's real tokens, never to padding), mean-pools the real tokens
and projects them. Features are L2-normalised (in float32, so the loss's logits are exact under AMP).
The logit scale starts at ``log(1 / 0.07)`` and, as open_clip clamps it after each step, is clamped to
``[0, log(100)]`` before each forward: the temperature never passes 100.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from dataio.formats.errors import ConfigError
from dataio.train.models import IMAGE_MODELS, build_image_model, check_vocab
from dataio.train.models.small_gpt import CausalBlock

INIT_LOGIT_SCALE = math.log(1 / 0.07)
MAX_LOGIT_SCALE = math.log(100)


@dataclass(frozen=True, kw_only=True)
class ClipTowers:
    """The sizes of the two towers: ``embed_dim`` is the shared width of the features."""

    embed_dim: int = 128
    text_width: int = 128
    text_layers: int = 2
    text_heads: int = 4

    def __post_init__(self) -> None:
        for name in ("embed_dim", "text_width", "text_layers", "text_heads"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{{0}} must be >= 1, got {getattr(self, name)}", name)
        if self.text_width % self.text_heads:
            raise ConfigError(f"{{0}} {self.text_width} must be a multiple of {{1}} {self.text_heads}",
                              "text_width", "text_heads")


class TextTower(nn.Module):
    """Token ids ``(N, L)`` and their attention mask -> ``(N, embed_dim)`` caption features (not normalised)."""

    def __init__(self, vocab_size: int, context_length: int, towers: ClipTowers) -> None:
        super().__init__()
        width = towers.text_width
        self.context_length = context_length
        self.embed, self.positions = nn.Embedding(vocab_size, width), nn.Embedding(context_length, width)
        self.blocks = nn.ModuleList(CausalBlock(width, towers.text_heads, 0.0) for _ in range(towers.text_layers))
        self.norm = nn.LayerNorm(width)
        self.projection = nn.Linear(width, towers.embed_dim, bias=False)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        n, length = input_ids.shape
        if length > self.context_length:
            raise ValueError(f"captions of {length} tokens > context_length {self.context_length}")
        keys = attention_mask.bool()
        # padding's token ids count nowhere, so an empty caption is its first position's embedding alone ...
        tokens = self.embed(input_ids) * keys[..., None].to(self.embed.weight.dtype)
        x = tokens + self.positions(torch.arange(length, device=input_ids.device))
        # ... which it attends to and pools: a row of no keys would be NaN, and a caption of real tokens has
        # its first one there anyway
        keys[:, 0] = True
        mask = keys[:, None, None, :]  # (N, 1, 1, L): every query sees the caption's real tokens
        for block in self.blocks:
            x = block(x, mask)
        weights = keys.to(x.dtype)[..., None]
        pooled = (self.norm(x) * weights).sum(1) / weights.sum(1)
        return self.projection(pooled)


class ClipModel(nn.Module):
    """``model(image, input_ids, attention_mask)`` -> ``(image_features, text_features, logit_scale)``:
    L2-normalised float32 features of the two towers and the temperature ``exp(logit_scale)``."""

    def __init__(self, image_tower: nn.Module, text_tower: TextTower) -> None:
        super().__init__()
        self.image_tower, self.text_tower = image_tower, text_tower
        self.logit_scale = nn.Parameter(torch.tensor(INIT_LOGIT_SCALE))

    def encode_image(self, image: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.image_tower(image).float(), dim=-1)

    def encode_text(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.text_tower(input_ids, attention_mask).float(), dim=-1)

    def forward(self, image: torch.Tensor, input_ids: torch.Tensor,
                attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        with torch.no_grad():  # open_clip clamps after each optimizer step; before each use is the same
            self.logit_scale.clamp_(0.0, MAX_LOGIT_SCALE)
        return (self.encode_image(image), self.encode_text(input_ids, attention_mask),
                self.logit_scale.float().exp())


def build_clip_model(image_model: str, vocab_size: int, context_length: int,
                     towers: ClipTowers = ClipTowers()) -> ClipModel:
    """The CLIP model with ``image_model`` (a name of ``IMAGE_MODELS``) as its image tower."""
    if image_model not in IMAGE_MODELS:
        raise ValueError(f"unknown image tower {image_model!r}; choose from {sorted(IMAGE_MODELS)}")
    if vocab_size < 1 or context_length < 1:
        raise ValueError(f"vocab_size and context_length must be >= 1, got {vocab_size} and {context_length}")
    check_vocab(vocab_size, "the captions' tokenizer")
    return ClipModel(build_image_model(image_model, towers.embed_dim),
                     TextTower(vocab_size, context_length, towers))
