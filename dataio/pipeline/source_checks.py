"""What a sample source hands the driver, checked: its failures, its repaired batch, its fields' rows.

A source is a new kind's own code (``SampleLoader(source)``), so the driver
does not take its word: a read task that named position 99 of a batch of 4
was an IndexError naming nothing, and position -1 silently dropped the last
sample instead of the failed one; a ``without`` that dropped nothing handed
out a sample the error policy had counted as skipped; a field one row short
reached the model beside ``sample_ids`` of the whole batch. Each is one
``ConfigError`` line naming the source (the loader's ``source`` parameter)
and what it returned. The checks cost nothing on a batch without failures
but a few attribute reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dataio.formats.errors import ConfigError, SampleError


def _name(source: Any) -> str:
    return type(source).__name__


def check_failures(source: Any, failures: list, count: int | None) -> None:
    """Each failure a ``(position, SampleError)`` pair; with ``count`` (the batch's samples, for a source whose
    positions are samples), each position in ``0..count - 1``."""
    for failure in failures:
        position, error = failure if isinstance(failure, tuple) and len(failure) == 2 else (None, None)
        if not isinstance(error, SampleError) or isinstance(position, bool) or not isinstance(position, int):
            raise ConfigError(f"{{0}} {_name(source)}: a read task must return [(position, SampleError), ...] "
                              f"for the samples it could not read, got {type(failure).__name__} "
                              f"{_short(failure)}", "source")
        if count is not None and not 0 <= position < count:
            raise ConfigError(f"{{0}} {_name(source)}: a read task named position {position} as failed in a "
                              f"batch of {count} samples (positions 0..{count - 1}; the error: {error})", "source")


def check_dropped(source: Any, before: int, after: Any, positions: list[int]) -> None:
    """``source.without`` must return a batch without the failed samples (``before`` samples, ``positions``
    failed): one that kept them handed out samples the error policy counted as dropped."""
    expected = before - len(set(positions))
    found = len(getattr(after, "samples", ()))
    if found != expected:
        raise ConfigError(f"{{0}} {_name(source)}: without() returned {found} samples for a batch of {before} "
                          f"with {len(set(positions))} failed: it must drop the failed samples "
                          "(dataio.pipeline.sample_source.drop_samples)", "source")


def check_rows(source: Any, fields: Mapping[str, Any], rows: int) -> None:
    """Every per-sample field (an array, tensor or list) has ``rows`` rows, the batch's samples."""
    for name, value in fields.items():
        shape = getattr(value, "shape", None)
        found = (shape[0] if shape else None) if shape is not None else (len(value) if isinstance(value, list)
                                                                          else rows)
        if found != rows:
            got = "no first dimension" if found is None else f"{found} rows"
            raise ConfigError(f"{{0}} {_name(source)}: field {name!r} has {got} for a batch of {rows} samples: "
                              "every field's first dimension is the batch's count (its sample ids)", "source")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
