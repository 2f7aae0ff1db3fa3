"""Validation sets of ``dataio train``: one folder, or named sets each evaluated and logged apart.

``--val web=PATH --val code=PATH`` (``TrainConfig(val={"web": ..., "code": ...})``)
gives each set's metrics under its name (``val_loss/web``, ``val_acc/code``, ...)
and, under the plain names, the metrics of all the sets' samples (tokens for
text) taken together: what one folder holding them all would give. One folder
keeps the plain names only, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

Totals = list[float]  # a task's sums over one set (correct, count, loss; or loss, tokens), all ranks together


def val_sets(val: Path | str | Mapping[str, Path | str] | None) -> dict[str, Path | str]:
    """``{name: folder}`` of the config's ``val``: empty without one, ``{"val": folder}`` for one folder."""
    if val is None:
        return {}
    return dict(val) if isinstance(val, Mapping) else {"val": val}


def val_columns(val: Path | str | Mapping[str, Path | str] | None, metrics: tuple[str, ...]) -> tuple[str, ...]:
    """The per-set metric names a run logs beside the plain ones (``val_loss/web``, ...): none for one folder."""
    if not isinstance(val, Mapping):
        return ()
    return tuple(f"val_{metric}/{name}" for metric in metrics for name in val)


def val_metrics(totals: dict[str, Totals], metrics: Callable[[Totals], dict[str, float]],
                named: bool) -> dict[str, float]:
    """``val_<metric>`` over all the sets' totals summed, and with ``named`` ``val_<metric>/<set>`` for each."""
    summed = [sum(column) for column in zip(*totals.values(), strict=True)]
    out = {f"val_{key}": value for key, value in metrics(summed).items()}
    if named:
        for name, one in totals.items():
            out.update({f"val_{key}/{name}": value for key, value in metrics(one).items()})
    return out
