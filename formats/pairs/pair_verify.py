"""What ``dataio verify`` checks of an image-text pair folder beyond every folder's and its columns' types
(``pair_table``; its ``verify`` part in ``dataio.formats.kinds``): the stored caption ids against the vocabulary
the manifest records."""

from __future__ import annotations

import pyarrow.compute as pc

from dataio.formats.dataset.verify_context import VerifyContext
from dataio.formats.pairs.pair_fields import TOKENS
from dataio.formats.pairs.pair_table import pair_table_problem


def verify_pairs(context: VerifyContext) -> None:
    """The largest stored caption id against the vocabulary size (one problem for the table); nothing when the
    columns or the tokenizer record are not what they should be (the kind's check has said why)."""
    table = context.table
    if table is None or pair_table_problem(context.manifest, table.table):
        return
    vocab = int(context.manifest.options.get("tokenizer", {}).get("vocab_size", 0))
    if vocab and TOKENS in table.table.schema.names:
        largest = pc.max(pc.list_flatten(table.table.column(TOKENS))).as_py()
        if largest is not None and largest >= vocab:
            context.sample_problem(-1, f"caption token id {largest} >= vocabulary size {vocab}")
