"""Per-step timing of a training run: waiting for data vs computing, and the run's verdict.

``wait`` is the time from the end of one step to the moment the next batch
is in hand; ``compute`` the forward, backward and optimizer step (on a GPU the
trainer synchronises at the end of the step, so it is the device's time). The
summary calls a run "input-bound" when waiting is more than 10% of the total,
and, given the loader's stage times, names the stage it waited on and what to
change (``dataio.train.bottleneck``).
"""

from __future__ import annotations

import json
import resource
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataio.formats.file_gate import atomic_writer
from dataio.formats.files import write_atomic
from dataio.train import bottleneck

INPUT_BOUND_SHARE = 0.10


@dataclass
class Chronometer:
    """Records steps and epochs; ``as_dict`` / ``from_dict`` carry it through a checkpoint."""

    unit: str = "img"  # what ``samples`` counts: img or tokens
    steps: list[dict[str, float]] = field(default_factory=list)
    epochs: list[dict[str, Any]] = field(default_factory=list)
    elapsed: float = 0.0  # run time before this process (resumed runs)
    _started: float = field(default_factory=time.perf_counter)
    _mark: float = field(default_factory=time.perf_counter)

    def start_wait(self) -> None:
        """Call when the step is done and the next batch is requested."""
        self._mark = time.perf_counter()

    def got_batch(self) -> float:
        """Call when the batch is in hand; returns the wait."""
        now = time.perf_counter()
        wait, self._mark = now - self._mark, now
        return wait

    def step_done(self, *, epoch: int, wait: float, samples: int, loss: float, lr: float) -> None:
        now = time.perf_counter()
        self.steps.append({"epoch": epoch, "time": self.now(), "wait": wait, "compute": now - self._mark,
                           "samples": samples, "loss": loss, "lr": lr})
        self._mark = now

    def now(self) -> float:
        """Seconds since the run started, across resumes."""
        return self.elapsed + time.perf_counter() - self._started

    def epoch_done(self, epoch: int, metrics: dict[str, float]) -> None:
        self.epochs.append({"epoch": epoch, "time": self.now(), **metrics})

    def summary(self, peak_memory_bytes: int | None = None, loader: dict[str, Any] | None = None) -> dict[str, Any]:
        """The run in numbers; ``loader`` (``{"stages": {stage: seconds}, "threads": n}``, from the train
        loader's stats) adds the stage breakdown, the bottleneck stage and the advice."""
        wait = sum(s["wait"] for s in self.steps)
        compute = sum(s["compute"] for s in self.steps)
        busy = wait + compute
        share = wait / busy if busy else 0.0
        peak = peak_memory_bytes if peak_memory_bytes is not None else peak_rss_bytes()
        diagnosis = {}
        if loader is not None:
            diagnosis = {"stages": loader["stages"], "decode_threads": loader["threads"],
                         **bottleneck.diagnose(loader["stages"], threads=loader["threads"],
                                               input_bound=share > INPUT_BOUND_SHARE, unit=self.unit,
                                               packed=loader.get("packed", False))}
        return {
            "steps": len(self.steps), "samples": sum(s["samples"] for s in self.steps), "unit": self.unit,
            "throughput": sum(s["samples"] for s in self.steps) / busy if busy else 0.0,
            "step_time_s": statistics.median(s["wait"] + s["compute"] for s in self.steps) if self.steps else 0.0,
            "input_wait_share": share, "verdict": "input-bound" if share > INPUT_BOUND_SHARE else "compute-bound",
            "peak_memory_mb": peak / 2**20, "run_time_s": self.now(), **diagnosis,
        }

    @staticmethod
    def summary_line(summary: dict[str, Any]) -> str:
        line = (f"throughput={summary['throughput']:,.0f} {summary['unit']}/s "
                f"step={summary['step_time_s'] * 1000:.1f}ms input_wait={summary['input_wait_share']:.1%} "
                f"verdict={summary['verdict']} peak_mem={summary['peak_memory_mb']:,.0f}MB")
        return line + (f" bottleneck={summary['bottleneck']}" if "bottleneck" in summary else "")

    @staticmethod
    def breakdown_lines(summary: dict[str, Any]) -> list[str]:
        """The loader's stages (seconds over the run) and the advice, when the summary has them."""
        stages = summary.get("stages")
        if not stages:
            return []
        shown = " ".join(f"{name}={stages[name]:.2f}s" for name in (*bottleneck.PIPELINE, "decode_wait", "wait")
                         if name in stages)
        threads = (f" ({summary['decode_threads']} decode threads; read/decode/resize are thread-seconds)"
                   if "decode_wait" in stages else "")  # an image loader's decode threads
        return [f"loader stages: {shown}{threads}", f"bottleneck: {summary['bottleneck']}: {summary['advice']}"]

    def as_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "steps": self.steps, "epochs": self.epochs, "elapsed": self.now()}

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> "Chronometer":
        return cls(unit=state["unit"], steps=list(state["steps"]), epochs=list(state["epochs"]),
                   elapsed=float(state["elapsed"]))

    def write(self, out: Path, summary: dict[str, Any]) -> list[Path]:
        """``out/log.json`` (every step and epoch, and the summary) and ``out/train.png``."""
        out.mkdir(parents=True, exist_ok=True)
        log = out / "log.json"
        write_atomic(log, (json.dumps({**self.as_dict(), "summary": summary}, indent=1) + "\n").encode())
        return [log] + self._plot(out / "train.png")

    def _plot(self, path: Path) -> list[Path]:
        try:  # deliberately lazy: matplotlib is optional (the bench extra) and slow to import
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            return []
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
        times = [s["time"] for s in self.steps]
        axes[0].plot(times, [s["loss"] for s in self.steps], lw=0.8)
        axes[0].set(xlabel="s", title="train loss")
        metric = next((k for k in ("val_acc", "val_loss") if self.epochs and k in self.epochs[0]), None)
        if metric:
            axes[1].plot([e["time"] for e in self.epochs], [e[metric] for e in self.epochs], marker="o")
        axes[1].set(xlabel="s", title=metric or "validation")
        rates = [s["samples"] / max(s["wait"] + s["compute"], 1e-9) for s in self.steps]
        axes[2].plot(times, rates, lw=0.8)
        axes[2].set(xlabel="s", title=f"throughput ({self.unit}/s)")
        fig.tight_layout()
        with atomic_writer(path) as f:  # matplotlib given a path would write through a link planted there
            fig.savefig(f, format="png", dpi=100)
        plt.close(fig)
        return [path]


def peak_rss_bytes() -> int:
    """Peak resident memory of this process (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
