"""Per-stage random generators seeded from (seed, epoch, rank, step).

Every random stage owns a CPU ``torch.Generator`` and draws its per-sample
parameters (op choices, magnitudes, boxes, lambdas) from it on the host. They
are a few numbers per sample, moved to the device in one copy, so there is no
device-side RNG and no host synchronisation, and the same seed gives the same
parameters on every device. Stages are re-seeded per batch by the loader,
which makes them resumable without saving generator state.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch


@dataclass(frozen=True, kw_only=True)
class SeedKey:
    """Where a stage is in the run: JSON-safe, enough to reproduce its next draw."""

    seed: int = 0
    epoch: int = 0
    rank: int = 0
    step: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


BATCH_TRANSFORM_STREAM = 4  # the streams: 1 RandAugment, 2 mix, 3 crop, 4 a batch_transform's generator, 5 views,
# 6 random erasing, 7 colour jitter


def derive_seed(key: SeedKey, stream: int) -> int:
    """A 63-bit seed, different for every (seed, epoch, rank, step, stream)."""
    entropy = [key.seed & 0xFFFFFFFF, key.seed >> 32, key.epoch, key.rank, key.step, stream]
    return int(np.random.SeedSequence(entropy).generate_state(2, dtype=np.uint32).view(np.uint64)[0] >> 1)


def hook_seed(key: SeedKey) -> int:
    """The seed of the generator a ``batch_transform`` gets for the batch at ``key``: a resume draws the same."""
    return derive_seed(key, BATCH_TRANSFORM_STREAM)


class RandomStage:
    """Base of a random stage: owns its generator; ``seed_for`` re-seeds it.

    ``stream`` separates stages that share a key (RandAugment and MixUp drawing
    from the same (seed, epoch, rank, step) get unrelated numbers).
    """

    stream: int = 0

    def __init__(self) -> None:
        self.generator = torch.Generator()
        self.key = SeedKey()
        self.seed_for(self.key)

    def seed_for(self, key: SeedKey) -> None:
        """Position the generator at ``key``; the next call draws from there."""
        self.key = key
        self.generator.manual_seed(derive_seed(key, self.stream))

    def get_state(self) -> dict[str, int]:
        """The key this stage was last seeded with (the loader saves its own position)."""
        return self.key.to_dict()

    def numpy_rng(self) -> np.random.Generator:
        """A numpy generator drawn from this stage's generator (for Beta draws torch lacks)."""
        bits = torch.randint(0, 2**62, (1,), generator=self.generator, dtype=torch.int64)
        return np.random.default_rng(int(bits[0]))
