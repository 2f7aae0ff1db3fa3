"""What ``dataio verify --deep`` checks of a token folder (``convert text``; its ``verify`` part in
``dataio.formats.kinds``): every token id of every Arrow shard against the vocabulary the manifest records."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from dataio.formats.dataset.verify_context import VerifyContext
from dataio.formats.file_gate import map_input


def verify_tokens(context: VerifyContext) -> None:
    """With ``deep``, each readable Arrow shard's largest id against the vocabulary size; its rows counted."""
    if not context.deep:
        return
    manifest = context.manifest
    vocab = int(manifest.options.get("tokenizer", {}).get("vocab_size", 0))
    for index, entry in enumerate(manifest.shards):
        if index in context.bad_shards or not entry.file.endswith(".arrow"):
            continue
        table = pa.ipc.open_file(map_input(context.folder / entry.file)).read_all()
        largest = pc.max(pc.list_flatten(table.column("input_ids"))).as_py()
        if vocab and largest is not None and largest >= vocab:
            context.report.problems.append(f"shard {entry.file}: token id {largest} >= vocabulary size {vocab}")
        context.report.samples_checked += table.num_rows
