"""An in-memory stand-in for the pair loader (not a test module): the trainer's loader interface over tensors.

Each sample's picture is a flat colour with noise, the colour one of ``CLASSES`` (four hues at three
shades); its caption names the class in one to three words (``[BOS, hue, shade words..., EOS]``,
padded), so a CLIP model can learn the pairing. Epoch order, each rank's share and its padding
repeats, and the resume position are dataio's own (``partition``, ``EpochPosition``), as in the real
loaders.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dataio.pipeline.loader_stats import LoaderStats
from dataio.sampling import partition
from dataio.sampling.epoch_position import EpochPosition
from dataio.train.clip_task import PairLoaders
from dataio.train.config import TrainConfig

HUES = ((0.9, 0.1, 0.1), (0.1, 0.8, 0.1), (0.1, 0.2, 0.9), (0.9, 0.8, 0.1))
SHADES = ((0.35, (8,)), (0.65, ()), (1.0, (9, 10)))  # brightness, and the caption's shade words
CLASSES = len(HUES) * len(SHADES)
PAD, BOS, EOS, VOCAB, CONTEXT = 0, 1, 2, 16, 8


@dataclass
class PairData:
    images: torch.Tensor  # (N, 3, S, S) float32, about zero mean
    input_ids: torch.Tensor  # (N, CONTEXT) int64
    attention_mask: torch.Tensor  # (N, CONTEXT) int64
    classes: torch.Tensor  # (N,) int64

    def __len__(self) -> int:
        return len(self.classes)


def caption_tokens(label: int) -> list[int]:
    hue, shade = divmod(label, len(SHADES))
    return [BOS, 4 + hue, *SHADES[shade][1], EOS]


def make_pairs(count: int, size: int = 32, seed: int = 0, noise: float = 0.15) -> PairData:
    """``count`` pairs, classes in a seeded random order."""
    rng = np.random.default_rng(seed)
    classes = rng.integers(0, CLASSES, count)
    colours = np.array([[c * SHADES[s][0] for c in HUES[h]] for h in range(len(HUES)) for s in range(len(SHADES))])
    pixels = colours[classes][:, :, None, None] + rng.normal(0.0, noise, (count, 3, size, size))
    ids = np.full((count, CONTEXT), PAD, dtype=np.int64)
    mask = np.zeros((count, CONTEXT), dtype=np.int64)
    for row, label in enumerate(classes):
        tokens = caption_tokens(int(label))
        ids[row, :len(tokens)], mask[row, :len(tokens)] = tokens, 1
    return PairData(torch.from_numpy(((pixels - 0.5) / 0.25).astype(np.float32)), torch.from_numpy(ids),
                    torch.from_numpy(mask), torch.from_numpy(classes))


class StandInPairLoader:
    """Dict batches of ``PairData`` (``image``, ``input_ids``, ``attention_mask``, ``sample_ids``, ``repeated``)."""

    def __init__(self, data: PairData, *, batch_size: int, seed: int = 0, world_size: int = 1, rank: int = 0,
                 shuffle: bool = True) -> None:
        self.data, self.batch_size, self.seed, self.shuffle = data, batch_size, seed, shuffle
        self.world_size, self.rank = world_size, rank
        self.position = EpochPosition(seed=seed, world_size=world_size)
        self.stats = LoaderStats(fixed_threads=1)
        self.closed = False

    @property
    def epoch(self) -> int:
        return self.position.epoch

    def set_epoch(self, epoch: int) -> None:
        self.position.set_epoch(epoch)

    def _share(self, consumed: int) -> tuple[np.ndarray, np.ndarray]:
        return partition.rank_share(len(self.data), world_size=self.world_size, rank=self.rank, consumed=consumed,
                                    drop_last=False)

    def __len__(self) -> int:
        positions, _ = self._share(self.position.consumed)
        return self.position.before + len(partition.batch_bounds(len(positions), self.batch_size))

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        consumed = self.position.begin(len(self.data))
        order = partition.epoch_order(len(self.data), seed=self.seed, epoch=self.epoch, shuffle=self.shuffle)
        positions, repeated = self._share(consumed)
        for start, stop in partition.batch_bounds(len(positions), self.batch_size):
            samples = torch.from_numpy(order[positions[start:stop]])
            self.position.advance(stop - start)
            yield {"image": self.data.images[samples], "input_ids": self.data.input_ids[samples],
                   "attention_mask": self.data.attention_mask[samples], "sample_ids": samples,
                   "repeated": torch.from_numpy(repeated[start:stop])}
        self.position.end()

    def state_dict(self) -> dict[str, Any]:
        return self.position.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.position.load_state_dict(state)

    def close(self) -> None:
        self.closed = True


def stand_in_factory(train: PairData, val: PairData | None):
    """A ``PairLoaderFactory`` over in-memory pairs, dealt as the config's ranks and seed say."""

    def loaders(config: TrainConfig, device: torch.device) -> PairLoaders:
        common = dict(batch_size=config.batch_size, seed=config.seed, world_size=config.world_size, rank=config.rank)
        return PairLoaders(train=StandInPairLoader(train, **common),
                           val={} if val is None else {"val": StandInPairLoader(val, shuffle=False, **common)},
                           vocab_size=VOCAB, context_length=CONTEXT)

    return loaders
