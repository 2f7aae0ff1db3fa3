"""``dataio train``: a compact trainer that consumes dataio's loaders.

The recipe's checklist: AMP (bf16, or fp16 with a GradScaler), channels_last,
``cudnn.benchmark``, OneCycle LR with warm-up (``dataio.train.schedule``: any
number of steps, re-planned when a resumed run gets more epochs or another
batch size; scaled per epoch with a dynamic batch size), label smoothing or
soft MixUp/CutMix targets, SGD with momentum or AdamW without weight decay on
norms and biases, opt-in ``torch.compile``, ``no_grad`` evaluation, and DDP (gloo on CPU, nccl on GPU,
``find_unused_parameters=False``) under ``torchrun``. Checkpoints (see
``dataio.train.checkpoint``) carry the loader position, so a run killed mid-epoch
resumes without repeating or skipping data; Ctrl-C (SIGINT), SIGTERM and
SIGUSR1 ask for a checkpoint at the next step boundary and end the run with
``TrainingInterrupted`` (``dataio.train.stop_signals``); rank 0 holds OUT's
lock (``OUT/.dataio.lock``) while it runs. A ``Chronometer``
splits each step into waiting for data and computing; ``Progress`` shows the
steps as they go, ``StepLogs`` writes ``OUT/log.csv`` (and TensorBoard scalars).
A mixture's samples, tokens and passes per source (``mixture_counts``) go into
each step's record, the epoch lines and the logs; its checkpoint records the
placed schedule, and a resume with another one is refused, saying what differs.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from dataio.formats.dataset.out_lock import locked_output
from dataio.formats.errors import CheckpointError
from dataio.train import bottleneck, checkpoint, checkpoint_fit, schedule, step_logs
from dataio.train.chronometer import Chronometer
from dataio.train.config import TrainConfig
from dataio.train.profiling import StepProfiler
from dataio.train.run_setup import amp_dtype, make_optimizer, output_folder, run_device
from dataio.train.progress import Progress
from dataio.train.step_logs import SourceColumns, StepLogs
from dataio.train.stop_signals import StopSignals, TrainingInterrupted
from dataio.train.task import Task
from dataio.train.task_choice import start_task
from dataio.train.val_sets import val_columns


class Trainer:
    """One run: ``Trainer(config).fit()`` returns the summary."""

    def __init__(self, config: TrainConfig) -> None:
        self.config = c = config
        self.device = run_device(c)
        self._lock = contextlib.ExitStack()  # OUT's lock on rank 0, held until fit() ends
        if c.rank == 0:
            output_folder(c.out)
            self._lock.enter_context(locked_output(c.out))  # a second trainer on OUT: one line naming the holder
            checkpoint.remove_leftovers(c.out)  # a SIGKILL mid-save leaves up to a checkpoint's size behind
        try:
            self._setup(c)
        except BaseException:
            self._lock.close()  # a run that never started keeps no lock
            raise

    def _setup(self, c: TrainConfig) -> None:
        if c.world_size > 1 and not dist.is_initialized():
            backend = "nccl" if self.device.type == "cuda" else "gloo"
            dist.init_process_group(backend, rank=c.rank, world_size=c.world_size)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            torch.backends.cudnn.benchmark = True
        torch.manual_seed(c.seed)
        if c.tensorboard and self.is_main:
            step_logs.summary_writer()  # a missing package is one line before any data is opened
        self.task: Task = start_task(c, self.device)  # chosen by the data's declared kind, checked, its loaders started
        self.epoch_steps = [self.task.steps_in_epoch(e) for e in range(c.epochs)]
        self.total_steps = sum(self.epoch_steps)
        self.task.train_loader.set_epoch(0)
        self.model = self.task.build_model().to(self.device)
        self.optimizer = make_optimizer(self.model, c)
        self.schedule: schedule.Schedule = self._curve(self.total_steps)
        self.amp_dtype = amp_dtype(c, self.device)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.amp_dtype is torch.float16)
        self.chronometer = Chronometer(unit=self.task.unit)
        self.tally = self.task.tally  # a mixture's per-source counts; None for one folder
        self.profiler: StepProfiler | None = None  # --profile: started with the first epoch
        self.progress: Progress | None = None  # rank 0, while fit() runs
        self.step = 0
        self.signals = StopSignals(c.world_size)  # a stop asked: checkpoint and stop at the next step boundary
        if c.resume:
            self._restore()
        self.counts_tokens = self.task.unit == "tokens"  # a mixture's per-source tokens go into its lines and logs
        columns = SourceColumns(self.tally.names if self.tally else (), tokens=self.counts_tokens,
                                val=step_logs.task_columns(self.task.val_metrics) + val_columns(c.val,
                                                                                               self.task.val_metrics))
        self.logs = (StepLogs(c.out, tensorboard=c.tensorboard, steps=self.chronometer.steps,
                              epochs=self.chronometer.epochs, sources=columns) if self.is_main else None)
        self.network: nn.Module = torch.compile(self.model) if c.compile else self.model
        if c.world_size > 1:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.network = nn.parallel.DistributedDataParallel(self.network, device_ids=ids,
                                                               find_unused_parameters=False)

    @property
    def is_main(self) -> bool:
        return self.config.rank == 0

    # -- checkpoints -------------------------------------------------------------------------
    def _curve(self, total: int) -> schedule.OneCycle:
        return schedule.OneCycle(peak=self.config.peak_lr, total=max(1, total), warmup=self.config.warmup)

    def _state(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "schedule": schedule.state(self.schedule, self.step), "scaler": self.scaler.state_dict(),
                "rng": checkpoint.rng_state(), "loader": self.task.train_loader.state_dict(), "step": self.step,
                "chronometer": json.dumps(self.chronometer.as_dict()),
                "mixture": json.dumps(self.task.mixture_record()),
                "run": checkpoint_fit.run_record(self.config, self.task.name),
                "tokenizer": json.dumps(self._tokenizer_record())}

    def _save(self) -> None:
        with self.signals.saving():  # a second signal waits for the checkpoint, never breaks torch's writer
            if self.is_main:
                checkpoint.save(self.config.out, self._state())
                if self.logs is not None:
                    self.logs.flush()
            if dist.is_initialized():
                dist.barrier()

    def _restore(self) -> None:
        state = checkpoint.load(self.config.out)
        if state is None:
            return
        try:
            self._restore_state(state)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError) as e:
            # read fine, so not corrupted: a dict that is not a trainer checkpoint, or one of another kind of run
            raise CheckpointError(f"checkpoint {self.config.out / checkpoint.NAME} does not fit this run "
                                  f"({checkpoint_fit.unfit_reason(e)}); resume with the options that wrote it, or "
                                  "move it away to start afresh") from None

    def _restore_state(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict):
            raise TypeError(f"it holds a {type(state).__name__}, not a dict")
        other = checkpoint.tokenizer_mismatch(json.loads(state.get("tokenizer", "null")), self._tokenizer_record())
        if other:  # before the shapes: a tokenizer of the same size fits them, and means other words
            raise CheckpointError(f"checkpoint {self.config.out / checkpoint.NAME} does not fit this run: {other}; "
                                  "resume with the tokenizer that wrote it, or move it away to start afresh")
        misfit = checkpoint_fit.misfit(state, self.model, self.config, self.task.name)
        if misfit:  # another model, its shapes (classes, vocabulary) or another optimizer: named, never "corrupted"
            raise CheckpointError(f"checkpoint {self.config.out / checkpoint.NAME} {misfit}; resume with the options "
                                  "and data that wrote it, or move it away to start afresh")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        checkpoint.set_rng_state(state["rng"])
        path = self.config.out / checkpoint.NAME
        mismatch = checkpoint.mixture_mismatch(json.loads(state.get("mixture", "null")), self._mixture_record())
        if mismatch:
            raise CheckpointError(f"checkpoint {path} does not fit this run: {mismatch}; resume with the options "
                                  "that wrote it, or move it away to start afresh")
        loader = self.task.train_loader
        try:
            loader.load_state_dict(state["loader"])
        except ValueError as e:  # another data set (its manifests' fingerprints), seed or batching
            raise CheckpointError(f"checkpoint {path} does not fit this run's data: {e}; resume with the options "
                                  "that wrote it, or move it away to start afresh") from None
        self.step = int(state["step"])
        self.chronometer = Chronometer.from_dict(json.loads(state["chronometer"]))
        # the plan from here: the steps done, the rest of this epoch (at this run's batch size), the later epochs
        epoch = loader.epoch
        rest = len(loader) - loader.position.before if epoch < self.config.epochs else 0
        self.total_steps = self.step + rest + sum(self.epoch_steps[epoch + 1:])
        self.schedule = schedule.resume(self._curve(self.total_steps), state.get("schedule"), self.step)
        consumed = int(state["loader"]["samples_consumed"])
        replanned = (f"; LR schedule re-planned for {self.total_steps} steps"
                     if isinstance(self.schedule, schedule.Resumed) and self.schedule.start == self.step else "")
        self._print(f"resumed from step {self.step}: epoch {epoch + 1}/{self.config.epochs}, {consumed} samples of it "
                    f"consumed{replanned}")  # epochs counted from 1, as the epoch lines count them

    def _tokenizer_record(self) -> dict | None:
        """The task's tokenizer (file, sha256), for tasks that tokenise (clip, lm); None for the others."""
        record = getattr(self.task, "tokenizer_record", None)
        return record() if callable(record) else None

    def _mixture_record(self) -> dict | None:
        """This run's mixture as a checkpoint holds it (JSON's lists and floats, to compare with a saved one)."""
        return json.loads(json.dumps(self.task.mixture_record()))

    # -- the loop ----------------------------------------------------------------------------
    def _print(self, line: str) -> None:
        if self.progress is not None:
            self.progress.write(line)
        elif self.is_main:
            print(line, flush=True)

    def _stop(self, signum: int) -> None:
        """Save, write log.json (the run so far, as a finished run writes it; a resumed run rewrites it at its end)
        and end with the signal's TrainingInterrupted; no signal breaks in."""
        with self.signals.saving():
            self._save()
            if self.is_main:
                self.chronometer.write(self.config.out, {**self._summary(), "interrupted_at_step": self.step})
            raise TrainingInterrupted(self.step, self.config.out / checkpoint.NAME, signum)

    def _summary(self) -> dict[str, Any]:
        """The run in numbers (``Chronometer.summary``), the last epoch's validation metrics, a mixture's totals."""
        peak = torch.cuda.max_memory_allocated(self.device) if self.device.type == "cuda" else None
        summary = self.chronometer.summary(peak, self._loader_times())
        summary.update({k: v for k, v in (self.chronometer.epochs[-1] if self.chronometer.epochs else {}).items()
                        if k.startswith("val_")})
        totals = self._source_totals()
        if totals:
            summary["sources"] = totals
        return summary

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp_dtype)

    def _train_step(self, batch: Any, epoch: int) -> tuple[float, int]:
        with self._autocast():
            loss, samples = self.task.loss(self.network, batch)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        lr = self.schedule.lr(self.step) * self.task.lr_scale(epoch)  # the dynamic batch's scaling on top
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # so compute time is the device's, not the launch's
        return float(loss.detach()), samples

    def _epoch(self) -> None:
        c, loader, clock = self.config, self.task.train_loader, self.chronometer
        epoch = loader.epoch
        self.network.train()
        if self.tally is not None:
            self.tally.begin_pass()
        clock.start_wait()
        for batch in self.task.train_batches():
            wait = clock.got_batch()
            loss, samples = self._train_step(batch, epoch)
            self.step += 1
            clock.step_done(epoch=epoch, wait=wait, samples=samples, loss=loss,
                            lr=self.optimizer.param_groups[0]["lr"])
            record: dict[str, Any] = clock.steps[-1]
            if self.tally is not None:
                record["sources"] = self.tally.as_dict(self.tally.step())
            if self.logs is not None:
                self.logs.step(self.step, record)
            if self.progress is not None:
                self.progress.step(step=self.step, epoch=epoch, epochs=c.epochs, samples=samples,
                                   seconds=record["wait"] + record["compute"], loss=loss, lr=record["lr"])
            if self.profiler is not None:
                self.profiler.step()
            stop = self.signals.stop_now(self.device)  # the same step on every rank
            if stop:
                self._stop(stop)
            if c.checkpoint_every and self.step % c.checkpoint_every == 0:
                self._save()
            if c.halt_after_steps is not None and self.step >= c.halt_after_steps:
                os._exit(75)  # fault injection: as if killed, with no cleanup and no final checkpoint
            clock.start_wait()
        digest = loader.epoch_digest() if hasattr(loader, "epoch_digest") else None  # the pass proved, every rank
        metrics = self.task.evaluate(self.network)
        recent = [s for s in clock.steps if s["epoch"] == epoch]
        rate = sum(s["samples"] for s in recent) / max(sum(s["wait"] + s["compute"] for s in recent), 1e-9)
        clock.epoch_done(epoch, {**metrics, "train_loss": recent[-1]["loss"] if recent else float("nan")})
        if digest is not None:
            clock.epochs[-1]["digest"] = digest
        sources = self.tally.epoch_summary() if self.tally is not None else {}
        if sources:
            clock.epochs[-1]["sources"] = sources
        if self.logs is not None:
            self.logs.epoch(self.step, clock.epochs[-1])
        shown = " ".join(f"{k}={v:.4f}" for k, v in metrics.items())
        self._print(f"epoch {epoch + 1}/{c.epochs} step={self.step} loss={recent[-1]['loss'] if recent else 0:.4f} "
                    f"{shown} {rate:,.0f} {self.task.unit}/s{self._sources_text(sources)}")
        stop = self.signals.stop_now(self.device)
        if stop and loader.epoch < c.epochs:  # asked during the evaluation: the checkpoint and log.json, as a step's
            self._stop(stop)
        self._save()  # after the last epoch a stop lets the run finish: only its summary is left to write

    def _sources_text(self, sources: dict[str, dict[str, int]]) -> str:
        """`` sources: web 1,200 samples 301,344 tokens 0 passes, ...`` (empty for one folder)."""
        if not sources:
            return ""
        parts = []
        for name, n in sources.items():
            tokens = f" {n['tokens']:,} tokens" if self.counts_tokens else ""
            passes = f"{n['passes']} pass{'' if n['passes'] == 1 else 'es'}"
            parts.append(f"{name} {n['samples']:,} samples{tokens} {passes}")
        return " sources: " + ", ".join(parts)

    def _loader_times(self) -> dict[str, Any]:
        """The train loader's stage seconds over this process's epochs, and its decode threads."""
        stats = self.task.train_loader.stats
        threads = stats.threads
        return {"stages": bottleneck.totals(stats.stages.as_dict()),
                "threads": threads.get("chosen") or threads.get("current") or 1,
                "packed": self.config.pack}  # a packed run is not told to --pack

    def _source_totals(self) -> dict[str, dict[str, int]]:
        """A mixture's samples and tokens of each source over the run's epochs, and the passes by the last."""
        totals: dict[str, dict[str, int]] = {}
        for record in self.chronometer.epochs:
            for name, counts in record.get("sources", {}).items():
                entry = totals.setdefault(name, {"samples": 0, "tokens": 0, "passes": 0})
                entry["samples"] += counts["samples"]
                entry["tokens"] += counts["tokens"]
                entry["passes"] = counts["passes"]
        return totals

    def fit(self) -> dict[str, Any]:
        """Train to ``config.epochs``; returns the summary (also in OUT/log.json).

        Raises ``TrainingInterrupted`` after a stop signal, once the checkpoint of the step it stopped at is saved.
        """
        self.signals.install()
        try:
            if self.config.profile_steps:
                self.profiler = StepProfiler(self.config.out, self.config.profile_steps, self.config.rank,
                                             self.device.type == "cuda")
            if self.is_main:
                self.progress = Progress(total=self.total_steps, done=self.step, unit=self.task.unit,
                                         every=self.config.progress_every)
            while self.task.train_loader.epoch < self.config.epochs:
                self._epoch()
            if self.progress is not None:
                self.progress.close()
                self.progress = None
            if self.profiler is not None:
                self.profiler.close()
                self._print(f"profile: {self.profiler.path} (open in Perfetto or TensorBoard)")
            summary = self._summary()
            self._print("summary: " + Chronometer.summary_line(summary) +
                        "".join(f" {k}={v:.4f}" for k, v in summary.items() if k.startswith("val_")))
            for line in Chronometer.breakdown_lines(summary):
                self._print(line)
            if self.is_main:
                self.chronometer.write(self.config.out, summary)
            if dist.is_initialized():
                dist.barrier()  # no rank tears the group down while another still uses it
            return summary
        finally:
            self.signals.restore()
            if self.progress is not None:
                self.progress.close()
                self.progress = None
            if self.logs is not None:
                self.logs.close()
            if self.profiler is not None:
                self.profiler.close()
            self.task.close()
            if self.config.world_size > 1 and dist.is_initialized():
                dist.destroy_process_group()
            self._lock.close()


def train(config: TrainConfig) -> dict[str, Any]:
    return Trainer(config).fit()
