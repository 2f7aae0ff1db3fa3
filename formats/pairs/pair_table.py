"""The checks of a pair folder's text columns and tokenizer record, made once when it is opened or verified.

The sample table's generic check (``sample_table.schema_problem``) accepts any column a manifest declares,
whatever its type; the readers of a pair folder then take the columns as they are: the captions as Arrow
strings, the ids' buffers as the C collate's uint8/16/32 arrays, the ``.json`` locations as int64. A table
rewritten by hand or by another tool (a caption column of integers, ids of int64 or strings, no
``json_offset``) or a manifest whose tokenizer record is not numbers (``pad_id: "zero"``, a vocabulary of 0
that would switch the id check off) would otherwise surface as a pyarrow or numpy traceback at the first
batch, or silently as wrong ids. ``pair_table_problem`` says in one line which column or entry is wrong and
what it should be.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from dataio.formats.dataset.manifest import Manifest
from dataio.formats.pairs.pair_fields import CAPTION, META, TOKENS, holds_pairs
from dataio.formats.dataset.sample_fields import member_columns

ID_TYPES = (pa.uint8(), pa.uint16(), pa.uint32())  # what the text path's C collate pads from


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _is_id_list(kind: pa.DataType) -> bool:
    return (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and kind.value_type in ID_TYPES


def _tokenizer_problem(record: Any, declared: str | None) -> str | None:
    """What is wrong with the manifest's tokenizer record of stored ids, or None."""
    if not isinstance(record, dict):
        return "stored caption ids but no tokenizer record (the manifest's options.tokenizer)"
    vocab = record.get("vocab_size")
    if isinstance(vocab, bool) or not isinstance(vocab, int) or vocab < 1:
        return f"the manifest's options.tokenizer.vocab_size is {vocab!r}, not a positive integer"
    for name in ("pad_id", "eos_id", "bos_id"):
        value = record.get(name)
        if value is None and name != "pad_id":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocab:
            return f"the manifest's options.tokenizer.{name} is {value!r}, not an id below the vocabulary size {vocab}"
    return None


def pair_table_problem(manifest: Manifest, table: pa.Table) -> str | None:
    """Why a pair folder's sample table (or its manifest's tokenizer record) cannot be read as one, or None;
    None too for a folder that does not hold pairs."""
    fields = manifest.sample_fields()
    if not holds_pairs(fields):
        return None
    schema = table.schema
    if CAPTION.name not in schema.names:
        return f"no {CAPTION.name!r} column, though the manifest declares captions"
    if not _is_text(schema.field(CAPTION.name).type):
        return f"column {CAPTION.name!r} is {schema.field(CAPTION.name).type}, not strings"
    if any(f.name == META.name for f in fields):
        for name in member_columns(META.name):
            if name not in schema.names:
                return f"no {name!r} column, though the manifest declares .json members"
            if schema.field(name).type != pa.int64():
                return f"column {name!r} is {schema.field(name).type}, not int64"
    declared = next((f.dtype for f in fields if f.name == TOKENS), None)
    if declared is not None and TOKENS not in schema.names:
        return f"no {TOKENS!r} column, though the manifest declares stored token ids"
    if TOKENS in schema.names:
        kind = schema.field(TOKENS).type
        if not _is_id_list(kind):
            return f"column {TOKENS!r} is {kind}, not lists of uint8, uint16 or uint32 token ids"
        if declared is not None and str(kind.value_type) != declared:
            return f"column {TOKENS!r} holds {kind.value_type} ids, the manifest declares {declared}"
        return _tokenizer_problem(manifest.options.get("tokenizer"), declared)
    return None
