"""timm's RandomErasing on a normalised batch: per sample, up to ``max_count`` boxes, drawn as timm draws them.

timm (timm/data/random_erasing.py) erases after normalisation: with probability ``probability`` a sample gets
``count`` boxes (uniform in [min_count, max_count]), each of area ``uniform(min_area, max_area) * H * W / count``
and aspect ``exp(uniform(log min_aspect, log max_aspect))``, rounded, tried 10 times until it fits, placed
uniformly; its pixels become 0 (``const``), one normal value per channel (``rand``) or normal noise
(``pixel``). The boxes are drawn on the host with timm's own sequence of ``random`` calls (a ``random.Random``
seeded from the stage's per-batch generator, so the same seed erases the same boxes as timm's module-level
``random`` does), then the batch is erased with one mask per box slot on the device.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from numbers import Integral
from typing import Literal

import numpy as np
import torch

from dataio.augment.seeding import RandomStage
from dataio.formats.errors import ConfigError

# Boxes per erased sample at most: each costs a pass over the batch and a slot of the (N, count, 4) box table, so
# 10**9 would ask 256 GB for a batch of 8 at the first batch; timm's recipes use 1-3, each box 1/count of the area.
MAX_COUNT = 32


@dataclass(frozen=True, kw_only=True)
class ErasingConfig:
    """timm's ``RandomErasing`` keywords (``re_prob``, ``re_mode``, ``re_count`` in its loader's names)."""

    probability: float = 0.5
    mode: Literal["const", "rand", "pixel"] = "const"
    min_area: float = 0.02
    max_area: float = 1 / 3
    min_aspect: float = 0.3
    max_aspect: float | None = None  # None: 1 / min_aspect
    min_count: int = 1
    max_count: int | None = None  # None: min_count

    def __post_init__(self) -> None:
        if not 0 <= self.probability <= 1:
            raise ConfigError(f"{{0}} must be a probability, got {self.probability}", "re_prob")
        if self.mode not in ("const", "rand", "pixel"):
            raise ConfigError(f"{{0}} must be const, rand or pixel (timm's), got {self.mode!r}", "re_mode")
        if not 0 < self.min_area <= self.max_area <= 1 or self.min_aspect <= 0:
            raise ConfigError("{0} needs 0 < min_area <= max_area <= 1 and min_aspect > 0", "erasing")
        for count in (self.min_count, self.max_count):
            if count is not None and (isinstance(count, bool) or not isinstance(count, Integral)):
                raise ConfigError(f"{{0}} is a whole number of boxes, got {count!r:.40}", "re_count")
        if self.min_count < 1:
            raise ConfigError(f"{{0}} must be >= 1, got {self.min_count}", "re_count")
        if self.max_count is not None and not self.min_count <= self.max_count <= MAX_COUNT:
            raise ConfigError(f"{{0}} must be in [{self.min_count}, {MAX_COUNT}] (boxes per sample), got "
                              f"{self.max_count}", "re_count")
        if self.min_count > MAX_COUNT:
            raise ConfigError(f"{{0}} must be <= {MAX_COUNT} (boxes per sample), got {self.min_count}", "re_count")

    @property
    def counts(self) -> tuple[int, int]:
        return self.min_count, self.max_count or self.min_count


def erasing_boxes(config: ErasingConfig, n: int, height: int, width: int, rng: random.Random) -> np.ndarray:
    """(n, max_count, 4) int64 boxes top, left, h, w; h = 0 where none (not erased, or no fit in 10 tries).

    The calls to ``rng`` are timm's ``_erase``'s, sample after sample, in the same order."""
    low, high = config.counts
    log_aspect = (math.log(config.min_aspect), math.log(config.max_aspect or 1 / config.min_aspect))
    boxes = np.zeros((n, high, 4), np.int64)
    area = height * width
    for i in range(n):
        if rng.random() > config.probability:
            continue
        count = low if low == high else rng.randint(low, high)
        for slot in range(count):
            for _ in range(10):
                target_area = rng.uniform(config.min_area, config.max_area) * area / count
                aspect = math.exp(rng.uniform(*log_aspect))
                h = int(round(math.sqrt(target_area * aspect)))
                w = int(round(math.sqrt(target_area / aspect)))
                if w < width and h < height:
                    top, left = rng.randint(0, height - h), rng.randint(0, width - w)
                    boxes[i, slot] = (top, left, h, w)
                    break
    return boxes


class RandomErasing(RandomStage):
    """``RandomErasing(ErasingConfig(...))(normalised float NCHW batch)``; erases in place and returns it."""

    stream = 6

    def __init__(self, config: ErasingConfig) -> None:
        super().__init__()
        self.config = config

    def draw(self, n: int, height: int, width: int) -> np.ndarray:
        """This batch's boxes (``erasing_boxes``), from a ``random.Random`` seeded by the stage's generator."""
        seed = int(torch.randint(0, 2**62, (1,), generator=self.generator)[0])
        return erasing_boxes(self.config, n, height, width, random.Random(seed))

    def __call__(self, images: torch.Tensor, boxes: np.ndarray | None = None) -> torch.Tensor:
        if not images.is_floating_point():
            raise ConfigError("{0} erases normalised float images, as timm does after Normalize: pass "
                              "normalize=True", "re_prob")
        n, channels, height, width = images.shape
        boxes = self.draw(n, height, width) if boxes is None else boxes
        if not boxes[..., 2].any():
            return images
        device = images.device
        rows = torch.arange(height, device=device).view(1, 1, height, 1)
        cols = torch.arange(width, device=device).view(1, 1, 1, width)
        noise = torch.Generator(device=device)
        noise.manual_seed(int(torch.randint(0, 2**62, (1,), generator=self.generator)[0]))
        for slot in range(boxes.shape[1]):
            box = torch.from_numpy(boxes[:, slot]).to(device, non_blocking=True)
            top, left, h, w = (box[:, i].view(-1, 1, 1, 1) for i in range(4))
            inside = (rows >= top) & (rows < top + h) & (cols >= left) & (cols < left + w)
            if self.config.mode == "pixel":
                fill = torch.randn(images.shape, generator=noise, device=device, dtype=images.dtype)
            elif self.config.mode == "rand":
                fill = torch.randn((n, channels, 1, 1), generator=noise, device=device, dtype=images.dtype)
            else:
                fill = torch.zeros((), device=device, dtype=images.dtype)
            images = torch.where(inside, fill, images)
        return images
