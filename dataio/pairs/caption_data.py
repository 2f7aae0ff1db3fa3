"""The text side of an opened pair data set: captions, stored token ids and where each ``.json`` lies.

Read from the sample table's declared columns (``formats.dataset.pair_fields``), memory-mapped as the
table is: the captions stay an Arrow column (a batch takes its rows), the ids are the list column's
buffers as numpy views (``TokenArrays``, what the text path's C collate pads from), never copied. A
mixture's sources are laid end to end, as ``image_mixture`` lays their tables; their stored ids must come
from one tokenizer (the same ids, the same tokens), unless the loader tokenises itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataio.formats.dataset.manifest import Manifest
from dataio.formats.kinds import kind_of
from dataio.formats.pairs.pair_fields import CAPTION, TOKENS, holds_pairs
from dataio.formats.dataset.sample_fields import member_columns
from dataio.formats.errors import ConfigError
from dataio.images.image_shards import ImageShards
from dataio.text.collate import TokenArrays

NO_TOKENIZER = {"sha256": None, "vocab_size": 0, "pad_id": 0, "eos_id": None}


@dataclass
class CaptionData:
    """Every sample's caption (and ids, json location), by the data set's sample id."""

    captions: pa.ChunkedArray  # strings
    tokens: TokenArrays | None  # the stored ids, BOS and EOS included; None when a source has none
    tokenizer: dict[str, Any]  # the manifest's record: sha256, vocab_size, pad_id, eos_id ...
    json_offset: np.ndarray  # (N,) int64, -1 where a sample has no metadata
    json_size: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        """Each caption's length: its stored tokens, else its characters (what bucketing sorts by)."""
        if self.tokens is not None:
            return self.tokens.lengths
        return pc.utf8_length(self.captions).to_numpy(zero_copy_only=False).astype(np.int64)

    @classmethod
    def of(cls, shards: ImageShards, want_ids: bool) -> "CaptionData":
        """``shards``' text (one source, or a mixture's sources end to end); ConfigError naming a source that is
        not a pair folder or, with ``want_ids``, whose ids come from another tokenizer."""
        if shards.mixture is None:
            parts = [(str(shards.folder), shards.manifest, shards.table.table)]
        else:
            parts = [(f"source {name!r}", s.manifest, s.table.table) for name, s in shards.mixture.sources.items()]
        for where, manifest, _ in parts:
            if not holds_pairs(manifest.sample_fields()):
                raise ConfigError(f"{{0}} is for image-text pair folders; {where} holds "
                                  f"{kind_of(manifest).what}", "captions")
        offset, size = member_columns("json")
        captions = pa.chunked_array([chunk for _, _, t in parts for chunk in t.column(CAPTION.name).chunks],
                                    pa.string())
        stored = all(TOKENS in t.schema.names for _, _, t in parts)
        tokens, tokenizer = (_tokens(parts, want_ids) if stored else None), _tokenizer(parts[0][1])
        return cls(captions, tokens, tokenizer if stored else NO_TOKENIZER,
                   np.concatenate([t.column(offset).to_numpy() for _, _, t in parts]).astype(np.int64),
                   np.concatenate([t.column(size).to_numpy() for _, _, t in parts]).astype(np.int64))


def _tokenizer(manifest: Manifest) -> dict[str, Any]:
    return {**NO_TOKENIZER, **manifest.options.get("tokenizer", {})}


def _tokens(parts: list[tuple[str, Manifest, pa.Table]], want_ids: bool) -> TokenArrays:
    """The sources' list columns as one ``TokenArrays`` (a chunk per Arrow chunk, zero copies)."""
    first = _tokenizer(parts[0][1])
    values, chunk_of, starts, lengths = [], [], [], []
    for where, manifest, table in parts:
        if want_ids and _tokenizer(manifest)["sha256"] != first["sha256"]:
            raise ConfigError(f"{{0}}: {where} was tokenised with another tokenizer than {parts[0][0]}; pack them with "
                              "one, or give captions=CaptionConfig(tokenizer=...) to tokenise as they are read",
                              "captions")
        for chunk in table.column(TOKENS).chunks:
            offsets = chunk.offsets.to_numpy()
            chunk_of.append(np.full(len(chunk), len(values), dtype=np.int32))
            starts.append(offsets[:-1].astype(np.int64))
            lengths.append(np.diff(offsets).astype(np.int64))
            values.append(chunk.values.to_numpy(zero_copy_only=True))
    return TokenArrays(values, np.concatenate(chunk_of), np.concatenate(starts), np.concatenate(lengths))


def _located(shards: ImageShards, sample: int) -> tuple[pa.Table, Manifest, int]:
    """The table and manifest ``sample`` lies in (a mixture's source), and its row there."""
    if shards.mixture is None:
        return shards.table.table, shards.manifest, sample
    source = int(shards.mixture.source_of(np.array([sample]))[0])
    opened = shards.mixture.sources[shards.mixture.names[source]]
    return opened.table.table, opened.manifest, sample - int(shards.mixture.offsets[source])


def caption_of(shards: ImageShards, sample: int) -> str:
    """One sample's caption (a map-style read: ``ShardDataset``); a mixture's from the source it lies in."""
    table, _, row = _located(shards, sample)
    return table.column(CAPTION.name)[row].as_py()


def ids_of(shards: ImageShards, sample: int) -> tuple[list[int], dict[str, Any]] | None:
    """One sample's stored token ids (BOS and EOS included) and its source's tokenizer record (``pad_id``,
    ``eos_id``); None where the folder stores no ids."""
    table, manifest, row = _located(shards, sample)
    if TOKENS not in table.schema.names:
        return None
    return [int(i) for i in table.column(TOKENS)[row].as_py()], _tokenizer(manifest)
