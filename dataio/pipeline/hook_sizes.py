"""A batch hook's output keeps the batch's size: each field checked after every call, one ``ConfigError`` if not.

``batch_transform`` returning fewer images than labels was accepted, and
``with_ids()`` then counted samples (sample ids, padding flags) that were not
in the batch; the text loader passed on ``input_ids`` one row short of the
mask. A hook may change values, dtypes and the other dimensions, not the
first: the loader's sample ids, ``repeated`` flags and counts describe the
batch's rows. Checking costs a few attribute reads per batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dataio.formats.errors import ConfigError

# The text batch's fields with a row per sample (or packed block): the others (cu_seqlens, max_seqlen, fields a
# hook adds) have a size of their own.
TEXT_ROW_FIELDS = ("input_ids", "attention_mask", "labels", "lengths", "position_ids", "sample_ids", "repeated")


def _rows(value: Any) -> int | None:
    """The first dimension of a tensor or array; None for one with no dimension."""
    shape = tuple(value.shape)
    return shape[0] if shape else None


def check_rows(hook: str, fields: Mapping[str, Any], rows: int, what: str) -> None:
    """ConfigError naming ``hook`` (its parameter) and the first field of ``fields`` (name -> tensor or array)
    whose first dimension is not ``rows``, with both sizes; ``what``: what a row is (``"samples"``)."""
    for name, value in fields.items():
        found = _rows(value)
        if found != rows:
            got = "no first dimension" if found is None else f"{found} rows"
            raise ConfigError(f"{{0}} returned {name} with {got} for a batch of {rows} {what}: every field must "
                              f"keep the batch's first dimension ({rows}), which the loader's sample ids and "
                              "counts describe", hook)


def checked_text_batch(out: object, rows: int) -> dict:
    """A text ``batch_transform``'s result, if it is a dict whose row fields (``TEXT_ROW_FIELDS``) keep ``rows``."""
    if not isinstance(out, dict):
        raise ConfigError(f"{{0}} must return the batch dict, got {type(out).__name__}", "batch_transform")
    check_rows("batch_transform", {name: out[name] for name in TEXT_ROW_FIELDS if hasattr(out.get(name), "shape")},
               rows, "rows")
    return out


def checked_dict(out: object, rows: int, *, per_object: frozenset[str] = frozenset(),
                 given: object = None) -> dict:
    """A dict ``batch_transform`` returned (image-text pairs, boxes, views), whose per-sample fields keep the batch's
    ``rows``: those the loader made (the keys of ``given``, the dict the hook got; every field without it), save
    ``per_object`` ones (a row per box, per view). A field the hook adds has a size of its own (iBOT's masks)."""
    if not isinstance(out, dict):
        raise ConfigError(f"{{0}} must return the batch dict, got {type(out).__name__}", "batch_transform")
    made = given if isinstance(given, dict) else out
    check_rows("batch_transform", {name: value for name, value in out.items()
                                   if name in made and name not in per_object and hasattr(value, "shape")}, rows,
               "samples")
    return out
