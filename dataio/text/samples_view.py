"""``TextLoader.dataset``: the token shards as a map-style data set (len, ``dataset[i]`` -> token ids)."""

from __future__ import annotations

import torch

from dataio.text.token_shards import TokenShards


class TextSamples:
    """Samples of a token shard folder; ``dataset[i]`` is sample ``i``'s checked token ids (int64)."""

    def __init__(self, shards: TokenShards) -> None:
        self._shards = shards
        self.classes: tuple[str, ...] = shards.manifest.classes

    def __len__(self) -> int:
        return len(self._shards)

    def __getitem__(self, index: int) -> torch.Tensor:
        if not -len(self) <= index < len(self):
            raise IndexError(f"sample {index} is not in 0..{len(self) - 1}")
        return torch.from_numpy(self._shards.checked_tokens(index % len(self)).astype("int64"))
