"""A small GPT-style causal transformer (pre-norm, learned positions, tied embeddings).

Takes the batches of ``dataio.TextLoader``: ``input_ids`` and, when packing,
``position_ids`` and ``cu_seqlens``. Packed rows are masked block-diagonally
so no token attends across a document boundary; padded rows use the
attention mask.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class CausalBlock(nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        n, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(n, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        drop = self.dropout if self.training else 0.0
        if mask is None:
            attended = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=drop)
        else:
            attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=drop)
        x = x + self.proj(attended.transpose(1, 2).reshape(n, t, d))
        return x + self.mlp(self.norm2(x))


class SmallGPT(nn.Module):
    def __init__(self, vocab_size: int, *, dim: int = 128, layers: int = 4, heads: int = 4, max_length: int = 2048,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.embed, self.positions = nn.Embedding(vocab_size, dim), nn.Embedding(max_length, dim)
        self.blocks = nn.ModuleList(CausalBlock(dim, heads, dropout) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab_size, bias=False)
        self.head.weight = self.embed.weight  # tied
        self.max_length = max_length
        for module in self.modules():  # GPT-2 init: small weights, so the first loss is about ln(vocab)
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None,
                document_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``(N, T, vocab)``; ``document_ids`` ``(N, T)`` restricts attention to a token's document."""
        n, t = input_ids.shape
        if t > self.max_length:
            raise ValueError(f"sequence of {t} tokens > max_length {self.max_length}")
        if position_ids is None:
            position_ids = torch.arange(t, device=input_ids.device).expand(n, t)
        x = self.embed(input_ids) + self.positions(position_ids)
        mask = None
        if document_ids is not None:
            causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            mask = (causal & (document_ids[:, :, None] == document_ids[:, None, :]))[:, None]
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.norm(x))
