"""Progressive resizing with an optional dynamic batch size (FFCV / fast.ai style).

Everything is a pure function of the epoch, so every DDP rank computes the
same resolution and batch size without talking to the others.
"""

from __future__ import annotations

from dataclasses import dataclass


def _round_to(value: float, multiple: int) -> int:
    return max(multiple, int(round(value / multiple)) * multiple)


@dataclass(frozen=True, kw_only=True)
class ResolutionSchedule:
    """Training resolution per epoch: ``start_size`` until ``ramp_start``, a linear ramp to
    ``end_size`` at ``ramp_end``, then ``end_size``; the last ``final_epochs`` of
    ``epochs`` use ``final_size`` (e.g. a higher, FixRes-style resolution).

    ``batch_size`` is the batch at the largest resolution. Left out (None), it
    is the loader's: ``ImageLoader(batch_size=64, schedule=ResolutionSchedule(...))``
    has one batch size, 64, and a schedule given its own takes it as the loader's
    (both given and different is a ``ConfigError``). With ``dynamic_batch``, the
    batch size scales as ``(largest size / size)^2`` from ``batch_size``, so
    pixels per batch, and activation memory, stay at most those of the largest
    setting; it is rounded down to a multiple of ``batch_multiple``.
    """

    epochs: int
    start_size: int = 160
    end_size: int = 224
    ramp_start: int = 0
    ramp_end: int | None = None  # default: epochs - final_epochs
    final_size: int | None = None
    final_epochs: int = 0
    batch_size: int | None = None  # None: the loader's batch_size (ImageLoaderConfig fills it in)
    dynamic_batch: bool = False
    size_multiple: int = 32
    batch_multiple: int = 8

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs}")
        sizes = [self.start_size, self.end_size] + ([self.final_size] if self.final_size else [])
        for size in sizes:
            if size < self.size_multiple or size % self.size_multiple:
                raise ValueError(f"resolution {size} is not a positive multiple of {self.size_multiple}")
        if not 0 <= self.final_epochs < self.epochs or (self.final_epochs and self.final_size is None):
            raise ValueError("final_epochs must be in [0, epochs) and needs final_size")
        if not 0 <= self.ramp_start <= self.ramp_stop <= self.epochs:
            raise ValueError(f"need 0 <= ramp_start <= ramp_end <= epochs, got {self.ramp_start}, {self.ramp_stop}")
        if self.batch_size is not None and self.batch_size < (self.batch_multiple if self.dynamic_batch else 1):
            raise ValueError(f"batch_size must be >= {self.batch_multiple if self.dynamic_batch else 1}"
                             f"{' with dynamic_batch (batch_multiple)' if self.dynamic_batch else ''}, "
                             f"got {self.batch_size}")

    @property
    def ramp_stop(self) -> int:
        return self.epochs - self.final_epochs if self.ramp_end is None else self.ramp_end

    @property
    def largest_size(self) -> int:
        return max(self.start_size, self.end_size, self.final_size or 0)

    def image_size(self, epoch: int) -> int:
        """Training resolution of ``epoch`` (0-based), a multiple of ``size_multiple``."""
        if self.final_size and epoch >= self.epochs - self.final_epochs:
            return self.final_size
        if epoch <= self.ramp_start or self.ramp_stop == self.ramp_start:
            return self.start_size if epoch < self.ramp_stop else self.end_size
        if epoch >= self.ramp_stop:
            return self.end_size
        progress = (epoch - self.ramp_start) / (self.ramp_stop - self.ramp_start)
        return _round_to(self.start_size + progress * (self.end_size - self.start_size), self.size_multiple)

    @property
    def base_batch_size(self) -> int:
        """``batch_size``; a ValueError saying where it comes from when it was left to the loader."""
        if self.batch_size is None:
            raise ValueError("this ResolutionSchedule takes its batch_size from the loader: read "
                             "loader.config.schedule, or give batch_size= to use the schedule alone")
        return self.batch_size

    def batch_size_at(self, epoch: int) -> int:
        """Batch size of ``epoch``: constant, or scaled to keep pixels per batch under the largest setting's."""
        if not self.dynamic_batch:
            return self.base_batch_size
        scaled = self.base_batch_size * (self.largest_size / self.image_size(epoch)) ** 2
        return max(self.batch_multiple, int(scaled) // self.batch_multiple * self.batch_multiple)

    def lr_scale(self, epoch: int) -> float:
        """Learning-rate multiplier for ``epoch`` (linear scaling rule: batch / base batch)."""
        return self.batch_size_at(epoch) / self.base_batch_size
