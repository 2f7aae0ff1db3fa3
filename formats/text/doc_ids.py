"""The first ``doc`` id of a rank's share of a text corpus: unique across ranks by construction.

Each row of a token shard carries ``doc``, the id of its source document. A
rank converts its share of the corpus alone and does not know how many
documents the shares before it hold (that would mean reading them); numbered
from 0 in every rank folder, the merged dataset had different documents
sharing a ``doc`` id. The merge cannot renumber them: it copies no shard, and
each rank's shards are checked against the sha256 its manifest records.

So rank r numbers its documents from an upper bound of the documents before
its share, known without reading them: each document of a .txt or .jsonl
piece takes at least one byte of it (an empty line is no document), and each
of a Parquet row group one row. Ids are then unique and in corpus order over
the merged dataset, with gaps between ranks; a one-process conversion (and
rank 0) numbers from 0 as before, so ids there are each document's index.
"""

from __future__ import annotations

from collections.abc import Sequence

from dataio.formats.remote.source_files import open_parquet_source as open_parquet
from dataio.formats.text.text_sources import TextPiece, source_kind


def first_doc_id(before: Sequence[TextPiece]) -> int:
    """At least as many as the documents in the pieces ``before`` a rank's share (bytes, or Parquet rows)."""
    bound, row_counts = 0, {}
    for piece in before:
        if source_kind(piece.path) == "parquet":
            if piece.path not in row_counts:  # the footer only, once per file
                metadata = open_parquet(piece.path).metadata
                row_counts[piece.path] = [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]
            groups = row_counts[piece.path]
            bound += sum(groups[piece.start:len(groups) if piece.stop is None else piece.stop])
        else:
            bound += (piece.path.stat().st_size if piece.stop is None else piece.stop) - piece.start
    return bound
