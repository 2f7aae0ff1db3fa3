"""Progress for people and for log files: a bar on a terminal, a plain line every ``interval`` seconds elsewhere.

tqdm redraws its bar with ``\\r`` several times a second; written to a file (a SLURM
job's output, ``nohup``, CI) every frame stays, and a long conversion leaves
megabytes of them. ``progress(...)`` gives tqdm only when stderr is a terminal;
otherwise ``LineProgress`` writes one line now and then, with the rate and, when the
total is known, the percentage and time left, and a last line at the end.
"""

from __future__ import annotations

import io
import os
import sys
import time
from typing import Any, TextIO

from tqdm import tqdm

DEFAULT_INTERVAL = 30.0  # seconds between lines in a log file


class LineProgress:
    """tqdm's ``update``/``close`` as periodic lines: ``convert: 1,200/5,000 img (24%), 310 img/s, 12s left``."""

    def __init__(self, *, total: int | None, initial: int, unit: str, desc: str, stream: TextIO,
                 interval: float = DEFAULT_INTERVAL) -> None:
        self.total, self.n, self.unit, self.desc = total, initial, unit, desc
        self.stream, self.interval = stream, interval
        self._start_n, self._start = initial, time.monotonic()
        self._last = self._start
        self._closed = False

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self._write(now)

    def _write(self, now: float, final: bool = False) -> None:
        elapsed = max(now - self._start, 1e-9)
        rate = (self.n - self._start_n) / elapsed
        done = f"{self.n:,}" + (f"/{self.total:,}" if self.total else "")
        parts = [f"{self.desc}: {done} {self.unit}"]
        if self.total:
            parts[0] += f" ({100 * self.n / self.total:.0f}%)"
        parts.append(f"{rate:,.0f} {self.unit}/s")
        if final:
            parts.append(f"{elapsed:.0f}s")
        elif self.total and rate > 0:
            parts.append(f"{(self.total - self.n) / rate:.0f}s left")
        print(", ".join(parts), file=self.stream, flush=True)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self.n > self._start_n:
                self._write(time.monotonic(), final=True)


def tqdm_size(stream: TextIO) -> dict[str, object]:
    """tqdm's size options: it follows the terminal's size, and a terminal that reports 0 x 0 (a pty nobody sized)
    gets 80 x 24, where tqdm would draw nothing (checked on tqdm 4.70: its bar is hidden as past the last row)."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        columns = None
    return {"ncols": 80, "nrows": 24} if columns == 0 else {"dynamic_ncols": True}


def progress(*, total: int | None = None, initial: int = 0, unit: str, desc: str, enabled: bool = True,
             stream: TextIO | None = None, interval: float = DEFAULT_INTERVAL) -> Any:
    """A progress reporter with ``update(n)`` and ``close()``: tqdm on a terminal, ``LineProgress`` otherwise."""
    stream = stream or sys.stderr
    if not enabled:
        return tqdm(disable=True)
    if getattr(stream, "isatty", lambda: False)():
        return tqdm(total=total, initial=initial, unit=unit, desc=desc, file=stream, **tqdm_size(stream))
    return LineProgress(total=total, initial=initial, unit=unit, desc=desc, stream=stream, interval=interval)
