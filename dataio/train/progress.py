"""Step progress of ``dataio train``: images (or tokens) per second, loss, LR and ETA while an epoch runs.

On a terminal it is a tqdm bar (its ETA, the rate and loss as postfix), and
the trainer's own lines are written through it. Anywhere else (a file, a
pipe, a job log) it is a plain line on the first step and then at most one
every ``every`` seconds: a log file gets no ``'\\r'`` frames. The rate and the
ETA count the steps' own seconds (waiting for data and computing), not
evaluation or checkpoints: ``samples / seconds`` since the last line, and the
remaining steps at that pace.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from tqdm import tqdm

from dataio.formats.progress import tqdm_size

BAR_REFRESH_S = 1.0  # how often the bar's rate and loss are renewed


def clock_text(seconds: float) -> str:
    """``h:mm:ss``."""
    seconds = max(0, round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class Progress:
    """Shows steps ``done + 1 .. total``; ``every`` <= 0 shows none (the trainer's own lines still pass)."""

    def __init__(self, *, total: int, done: int, unit: str, every: float, stream: TextIO | None = None,
                 tty: bool | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.total, self.unit, self.every, self.clock = total, unit, every, clock
        tty = bool(getattr(self.stream, "isatty", lambda: False)()) if tty is None else tty
        self.bar = (tqdm(total=total, initial=done, unit="step", file=self.stream, leave=False,
                         **tqdm_size(self.stream)) if tty and every > 0 else None)
        self._shown: float | None = None  # clock of the last line (or bar refresh)
        self._samples = self._seconds = 0.0
        self._steps = 0

    def step(self, *, step: int, epoch: int, epochs: int, samples: int, seconds: float, loss: float,
             lr: float) -> None:
        """After optimizer step ``step`` (1-based) of 0-based ``epoch``, which took ``seconds`` for ``samples``."""
        if self.every <= 0:
            return
        self._samples += samples
        self._seconds += seconds
        self._steps += 1
        if self.bar is not None:
            self.bar.update(1)
        now = self.clock()
        due = BAR_REFRESH_S if self.bar is not None else self.every
        if self._shown is not None and now - self._shown < due:
            return
        self._shown = now
        rate = self._samples / max(self._seconds, 1e-9)
        fields = f"loss={loss:.4f} lr={lr:.3g} {rate:,.0f} {self.unit}/s"
        if self.bar is not None:
            self.bar.set_postfix_str(f"epoch {epoch + 1}/{epochs} {fields}")
        else:
            eta = (self.total - step) * self._seconds / self._steps
            self.write(f"step {step}/{self.total} epoch {epoch + 1}/{epochs} {fields} eta {clock_text(eta)}")
        self._samples = self._seconds = 0.0
        self._steps = 0

    def write(self, line: str) -> None:
        """A line of the trainer's (epoch results, summary): above the bar on a terminal."""
        if self.bar is not None:
            self.bar.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
