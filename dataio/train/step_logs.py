"""``OUT/log.csv`` and, with ``tensorboard=True``, TensorBoard scalars in ``OUT/tensorboard``.

``log.csv`` has one row per optimizer step (``step`` 1-based, ``epoch``
0-based, ``time_s`` since the run began, ``loss``, ``lr``, ``samples`` in the
step and ``per_second``, in the run's unit: images or tokens) and one row per
finished epoch, on that epoch's last step, with the validation metrics and the
epoch's last train loss (its step columns blank), as Lightning's CSVLogger
does. Rows are appended as steps finish and flushed with every checkpoint and
epoch, so ``tail -f`` follows a run; a resumed run rewrites the file from its
checkpoint's steps, so rows a killed run wrote past its checkpoint are gone.

Named validation sets (``--val NAME=PATH``, ``dataio.train.val_sets``) add their metrics per epoch last
(``val_acc/NAME`` and ``val_loss/NAME``, or ``val_loss/NAME`` and ``val_ppl/NAME``; TensorBoard:
``val/loss/NAME`` ...); ``val_*`` then holds all the sets together.
A mixture adds a column per source after these: ``samples/NAME`` (and
``tokens/NAME`` for text) in step rows, the step's samples (documents when
packing) and tokens of each source, all ranks together
(``dataio.train.mixture_counts``); ``passes/NAME`` in epoch rows, the passes
the source has finished by the epoch's end.

TensorBoard gets ``train/loss``, ``train/lr`` and ``train/per_second`` per
step and ``val/<metric>`` per epoch, against the step (a mixture: the same
``samples/NAME``, ``tokens/NAME`` per step and ``passes/NAME`` per epoch); a
resumed run purges the events past its checkpoint's step
(``SummaryWriter(purge_step=...)``).
The writer's queue holds 1,000 events, not 10: with 10, three scalars a step
blocked on the writer thread (0.26 ms a step back to back); between 2 ms
steps a step's rows cost about 0.02 ms (CSV) and 0.1 ms (CSV and
TensorBoard) on the shared 2-core VM.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from dataio.formats.errors import ConfigError
from dataio.formats.file_gate import open_append, refuse_link
from dataio.formats.files import write_atomic

COLUMNS = ("step", "epoch", "time_s", "loss", "lr", "samples", "per_second", "val_acc", "val_loss", "val_ppl")
CSV_NAME = "log.csv"
TENSORBOARD = "tensorboard"


class SourceColumns:
    """The columns after ``COLUMNS``: a mixture's ``samples/NAME``, ``tokens/NAME`` (``tokens=True``) per step and
    ``passes/NAME`` per epoch, then named validation sets' metrics per epoch (``val``: ``val_loss/NAME``, ...)."""

    def __init__(self, names: tuple[str, ...] = (), tokens: bool = False, val: tuple[str, ...] = ()) -> None:
        self.names, self.tokens, self.val = tuple(names), tokens, tuple(val)
        self.step_kinds = ("samples", "tokens") if tokens else ("samples",)

    @property
    def header(self) -> list[str]:
        return [f"{kind}/{name}" for kind in (*self.step_kinds, "passes") for name in self.names] + list(self.val)

    def step_values(self, record: dict[str, Any]) -> list[Any]:
        """The step's counts (``record["sources"]``: ``{name: [samples, tokens]}``), then blank passes and metrics."""
        counts = record.get("sources", {})
        values = [counts[name][i] if name in counts else "" for i in range(len(self.step_kinds))
                  for name in self.names]
        return values + [""] * (len(self.names) + len(self.val))

    def epoch_values(self, record: dict[str, Any]) -> list[Any]:
        """Blank counts, the passes by the epoch's end (``record["sources"]``: ``{name: {"passes": n}}``), then the
        named validation sets' metrics."""
        totals = record.get("sources", {})
        return ([""] * len(self.step_kinds) * len(self.names)
                + [totals[name]["passes"] if name in totals else "" for name in self.names]
                + [f"{record[column]:.6g}" if column in record else "" for column in self.val])


def task_columns(metrics: tuple[str, ...]) -> tuple[str, ...]:
    """The columns of a task's validation metrics that ``COLUMNS`` lacks (CLIP's ``val_i2t_r1`` ... recall), after
    the rest, in epoch rows."""
    return tuple(f"val_{metric}" for metric in metrics if f"val_{metric}" not in COLUMNS)


def _step_row(step: int, record: dict[str, Any], sources: SourceColumns) -> list[Any]:
    seconds = record["wait"] + record["compute"]
    return [step, record["epoch"], f"{record['time']:.3f}", f"{record['loss']:.6g}", f"{record['lr']:.6g}",
            record["samples"], f"{record['samples'] / max(seconds, 1e-9):.1f}", "", "", "",
            *sources.step_values(record)]


def _epoch_row(step: int, record: dict[str, Any], sources: SourceColumns) -> list[Any]:
    metrics = [f"{record[name]:.6g}" if name in record else "" for name in COLUMNS[7:]]
    return [step, record["epoch"], f"{record['time']:.3f}", f"{record.get('train_loss', float('nan')):.6g}",
            "", "", "", *metrics, *sources.epoch_values(record)]


def rows(steps: list[dict[str, Any]], epochs: list[dict[str, Any]],
         sources: SourceColumns | None = None) -> list[list[Any]]:
    """The rows of a run's steps and epochs (a Chronometer's), each epoch after its last step."""
    sources = sources or SourceColumns()
    out: list[list[Any]] = []
    finished = {e["epoch"]: e for e in epochs}
    for i, record in enumerate(steps):
        out.append(_step_row(i + 1, record, sources))
        last_of_epoch = i + 1 == len(steps) or steps[i + 1]["epoch"] != record["epoch"]
        if last_of_epoch and record["epoch"] in finished:
            out.append(_epoch_row(i + 1, finished.pop(record["epoch"]), sources))
    return out


def summary_writer() -> type:
    """torch's ``SummaryWriter``; ConfigError naming ``tensorboard`` when the tensorboard package is missing."""
    try:
        from torch.utils.tensorboard import SummaryWriter  # lazy: it imports the tensorboard package
    except ImportError:
        raise ConfigError("{0} needs the tensorboard package, which is not installed (pip install tensorboard)",
                          "tensorboard") from None
    return SummaryWriter


def open_tensorboard(folder: Path, purge_step: int | None) -> Any:
    """A ``SummaryWriter`` on ``folder`` that drops the events at ``purge_step`` and past it."""
    SummaryWriter = summary_writer()
    refuse_link(folder, "TensorBoard's event files")  # it names and opens its files itself: the folder is dataio's
    return SummaryWriter(log_dir=str(folder), purge_step=purge_step, max_queue=1000)


class StepLogs:
    """The CSV (always) and TensorBoard (``tensorboard=True``) of one rank-0 process."""

    def __init__(self, out: Path, *, tensorboard: bool, steps: list[dict[str, Any]],
                 epochs: list[dict[str, Any]], sources: SourceColumns | None = None) -> None:
        self.path = out / CSV_NAME
        self.sources = sources or SourceColumns()
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([*COLUMNS, *self.sources.header])
        writer.writerows(rows(steps, epochs, self.sources))
        write_atomic(self.path, buffer.getvalue().encode())  # the checkpoint's rows, nothing past them
        self._file = open_append(self.path, "its step log")  # never through a link planted in OUT
        self._csv = csv.writer(self._file, lineterminator="\n")
        self.writer = open_tensorboard(out / TENSORBOARD, len(steps) + 1 if steps else None) if tensorboard else None

    def step(self, step: int, record: dict[str, Any]) -> None:
        row = _step_row(step, record, self.sources)
        self._csv.writerow(row)
        if self.writer is not None:
            self.writer.add_scalar("train/loss", record["loss"], step)
            self.writer.add_scalar("train/lr", record["lr"], step)
            self.writer.add_scalar("train/per_second", float(row[6]), step)
            for name, counts in record.get("sources", {}).items():
                for kind, value in zip(self.sources.step_kinds, counts, strict=True):
                    self.writer.add_scalar(f"{kind}/{name}", value, step)

    def epoch(self, step: int, record: dict[str, Any]) -> None:
        self._csv.writerow(_epoch_row(step, record, self.sources))
        if self.writer is not None:
            for name, value in record.items():
                if name.startswith("val_"):
                    self.writer.add_scalar(f"val/{name[4:]}", value, step)
            for name, totals in record.get("sources", {}).items():
                self.writer.add_scalar(f"passes/{name}", totals["passes"], step)
        self.flush()

    def flush(self) -> None:
        self._file.flush()
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        self.flush()
        self._file.close()
        if self.writer is not None:
            self.writer.close()
            self.writer = None
