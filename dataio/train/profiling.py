"""``dataio train --profile STEPS``: a torch.profiler trace of the first steps, loader stages included.

The trace (Chrome trace JSON, ``OUT/profile/rank<R>.pt.trace.json``, read
by TensorBoard's profiler plugin and by Perfetto) covers one warm-up step
and then ``STEPS`` steps. The loaders run with ``profile=True``, so their
stages (``dataio.read``, ``dataio.decode``, ``dataio.resize`` on the decode
threads; ``dataio.wait``, ``dataio.copy``, ``dataio.augment`` on the
training thread) are named ranges on their threads, and NVTX ranges on CUDA
for Nsight Systems. The profiler records every thread (``all_threads_config``).
"""

from __future__ import annotations

from pathlib import Path

import torch

from dataio.formats.file_gate import private_temp_path, refuse_link
from dataio.pipeline.stage_times import all_threads_config


class StepProfiler:
    """``step()`` after each training step; ``close()`` writes the trace if it has not been written yet."""

    def __init__(self, out: Path, steps: int, rank: int, cuda: bool) -> None:
        self.path = out / "profile" / f"rank{rank}.pt.trace.json"
        refuse_link(self.path.parent, "the profiler's traces")  # before training, not at the trace's write
        activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
        self._profiler: torch.profiler.profile | None = torch.profiler.profile(
            activities=activities, schedule=torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1),
            on_trace_ready=self._write, experimental_config=all_threads_config())
        self._profiler.start()
        self.written = False

    def _write(self, profiler: torch.profiler.profile) -> None:
        refuse_link(self.path.parent, "the profiler's traces")  # a link planted since the start
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with private_temp_path(self.path, "a profiler trace") as partial:  # torch opens it itself: no link there
            profiler.export_chrome_trace(str(partial))  # moved into place whole: never a half-written trace
        self.written = True

    def step(self) -> None:
        if self._profiler is not None:
            self._profiler.step()
            if self.written:
                self.close()

    def close(self) -> None:
        """Stop profiling (writing the trace of the steps so far when the run ended first)."""
        profiler, self._profiler = self._profiler, None
        if profiler is not None:
            profiler.stop()
