"""Stopping ``dataio train`` at a step boundary on a signal: Ctrl-C (SIGINT), SIGTERM and SIGUSR1.

SLURM sends SIGTERM at preemption and at the time limit (SIGKILL follows
``KillWait`` later, 30 s by default), and the signal of ``--signal=USR1@SECS``
that many seconds before the limit; torchrun's agent passes SIGINT and SIGTERM
on to each worker (and SIGKILLs it 30 s later). Each signal asks for a stop:
the trainer finishes its step, every rank stops at the same step (the request
is reduced over the ranks each step), writes the checkpoint and ``log.json``,
and ends with ``TrainingInterrupted``, whose ``exit_code`` is 128 + the
signal's number (130, 143 and 138 on Linux): what a shell reports for a
process the signal killed, so a job script tells a stop from a finished
(0) or failed (1, 2) run, and resumes with ``--resume``.

A second signal never breaks a save: inside ``saving()`` every signal is only
noted, since an exception raised in ``torch.save`` left its zip writer
half-written and ended in a 30-line traceback of torch's. Outside a save a
second Ctrl-C on one process stops at once (``KeyboardInterrupt``, no
checkpoint); a repeated SIGTERM or SIGUSR1, and any repeat under torchrun
(whose agent forwards the terminal's SIGINT, as SLURM signals every process
of a job step besides the agent's own forwarding), only asks again.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)


class TrainingInterrupted(KeyboardInterrupt):
    """A signal stopped the run at a step boundary, after saving ``checkpoint`` (step ``step``)."""

    def __init__(self, step: int, path: Path, signum: int = signal.SIGINT) -> None:
        self.step, self.checkpoint, self.signal = step, path, signal.Signals(signum)
        super().__init__(f"{self.what} at step {step}, checkpoint saved to {path}")

    @property
    def what(self) -> str:
        """``interrupted`` (Ctrl-C) or ``stopped by SIGTERM`` (the scheduler's signals)."""
        return "interrupted" if self.signal == signal.SIGINT else f"stopped by {self.signal.name}"

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as a shell reports a process killed by it."""
        return 128 + int(self.signal)

    def __reduce__(self) -> tuple:
        return type(self), (self.step, self.checkpoint, int(self.signal))


class StopSignals:
    """The stop requests of one training process: ``asked`` is the signal that asked (0: none)."""

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self.asked = 0  # the highest signal number received; every rank takes the highest of all ranks
        self._saving = 0  # the depth of nested saving() blocks
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        """Take the signals over, on the main thread only (the only one where Python runs signal handlers)."""
        if threading.current_thread() is threading.main_thread():
            self._previous = {signum: signal.signal(signum, self._on_signal) for signum in HANDLED}

    def restore(self) -> None:
        """Give the signals back to the handlers before ``install``."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous = {}

    def _on_signal(self, signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and self.asked and self.world_size == 1 and not self._saving:
            raise KeyboardInterrupt  # a second Ctrl-C: at once, without a checkpoint
        self.asked = max(self.asked, signum)

    @contextlib.contextmanager
    def saving(self) -> Iterator[None]:
        """A block no signal interrupts (a checkpoint, the logs): signals in it are only noted. Blocks nest."""
        self._saving += 1
        try:
            yield
        finally:
            self._saving -= 1

    def stop_now(self, device: torch.device) -> int:
        """The signal that asked for a stop on any rank (the highest), or 0; every rank gets the same answer."""
        if self.world_size == 1:
            return self.asked
        flag = torch.tensor([float(self.asked)], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return int(flag.item())
