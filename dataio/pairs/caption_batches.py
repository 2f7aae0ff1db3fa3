"""A pair batch's text fields: token ids padded (stored, or tokenised here), caption strings, keys, ``.json`` fields.

One read task per batch, run on a decode thread beside the image chunks. Stored ids are padded by the
text path's C collate straight from the sample table's memory map (``padded_rows``: ~10 us for a batch of
256 captions); without them a ``tokenizers`` tokenizer encodes the batch's captions (``encode_batch``
releases the GIL, so the image decodes go on meanwhile). Then every row is cut at ``max_length``
(``cut_rows``: the first tokens kept, the last one the EOS when the ids end with one). What it cannot read is
a ``SampleError`` naming the sample, under the loader's error policy: an id past the vocabulary (stored, or
given by the tokenizer: a template's special id outside it), a caption the tokenizer fails on (a regex
panic, ``tokenizer_calls``), a ``.json`` asked for that cannot be read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from dataio.formats.pairs.pair_fields import MAX_META_BYTES
from dataio.formats.errors import ConfigError, ShardError, UsageError
from dataio.formats.remote.secrets import redact
from dataio.formats.text.client_tokenizers import ClientTokenizer, as_tokenizer, caption_rows
from dataio.formats.text.tokenizer_calls import TokenizerFailure, encoded_each, end_id, id_bound
from dataio.pairs.caption_config import CaptionConfig
from dataio.pairs.caption_data import CaptionData
from dataio.images.image_shards import ImageShards
from dataio.pipeline.error_policy import DATA_EXCEPTIONS
from dataio.pipeline.sample_source import Failures
from dataio.pipeline.stage_times import Lap
from dataio.text.collate import padded_rows, padded_width


def load_tokenizer(tokenizer: Any) -> tuple[Any, int]:
    """A private copy of ``tokenizer`` (a JSON file, a ``Tokenizer``, a transformers fast tokenizer; open_clip's
    wrapped: ``client_tokenizers.as_tokenizer``) without padding or truncation (rows are padded and cut here, the
    same way as stored ids), and its padding id: the one its padding names (a pair folder's ``tokenizer.json``
    names the stored ids' one), else ``<pad>``'s, else 0; open_clip's own (0 for CLIP's)."""
    from tokenizers import Tokenizer  # lazy: only loaders that tokenise import it

    from dataio.formats.text.tokenizer_setup import read_tokenizer_text

    if not isinstance(tokenizer, (str, Path)):
        copy = as_tokenizer(tokenizer)
        if isinstance(copy, ClientTokenizer):
            return copy, copy.pad_id
        source = tokenizer if isinstance(tokenizer, Tokenizer) else tokenizer.backend_tokenizer
        padding = source.padding
        pad_id = padding["pad_id"] if padding else copy.token_to_id("<pad>")
        return copy, 0 if pad_id is None else int(pad_id)
    try:  # a file is read as the converters read one: a regular file, a bounded size (Tokenizer.from_file
        # blocked for ever on a FIFO, holding the GIL, and read /dev/zero until memory ran out)
        copy = Tokenizer.from_str(read_tokenizer_text(Path(tokenizer)))
    except UsageError as e:
        raise ConfigError(f"{{0}}: {redact(str(e))}", "tokenizer") from None
    except Exception as e:  # the Rust side raises a bare Exception for any parse error
        raise ConfigError(f"{{0}} {redact(str(tokenizer)[:200])!r} is not a tokenizers JSON file ({str(e)[:200]})",
                          "tokenizer") from None
    padding = copy.padding
    pad_id = padding["pad_id"] if padding else copy.token_to_id("<pad>")
    copy.no_padding()
    copy.no_truncation()
    return copy, 0 if pad_id is None else int(pad_id)


def cut_rows(ids: np.ndarray, mask: np.ndarray, lengths: np.ndarray, config: CaptionConfig, pad_id: int,
             last: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The padded rows cut at ``max_length``, keeping their first tokens (a cut row's last kept token replaced by
    ``last``, its EOS, as open_clip's tokenizer does; None, ids without an EOS: kept as they are), or widened to
    it with ``pad_to_max_length``."""
    limit = config.max_length
    if limit is None:
        return ids, mask
    if ids.shape[1] > limit:
        ids, mask = ids[:, :limit], mask[:, :limit]
        if last is not None:
            cut = lengths > limit
            ids[cut, limit - 1] = last[cut]
    if config.pad_to_max_length and ids.shape[1] < limit:
        extra = limit - ids.shape[1]
        ids = np.pad(ids, ((0, 0), (0, extra)), constant_values=pad_id)
        mask = np.pad(mask, ((0, 0), (0, extra)))
    return np.ascontiguousarray(ids), np.ascontiguousarray(mask)


class CaptionBatches:
    """The text fields of ``shards``' pair batches, as ``config`` asks (``CaptionConfig``)."""

    def __init__(self, shards: ImageShards, config: CaptionConfig) -> None:
        self.shards, self.config = shards, config
        self.data = CaptionData.of(shards, want_ids=config.tokenizer is None)
        self.tokenizer, pad_id = load_tokenizer(config.tokenizer) if config.tokenizer is not None else (None, 0)
        self.ids = self.tokenizer is not None or self.data.tokens is not None
        self.text = config.text or not self.ids
        if isinstance(self.tokenizer, ClientTokenizer):  # open_clip's: the ids it names
            self.pad_id, self.eos_id, self.vocab_size = pad_id, self.tokenizer.eos_id, self.tokenizer.vocab_size
        elif self.tokenizer is not None:  # ids bounded by its largest id, cut rows ended by what it appends
            self.pad_id, self.eos_id, self.vocab_size = pad_id, end_id(self.tokenizer), id_bound(self.tokenizer)
        else:
            record = self.data.tokenizer
            self.pad_id, self.eos_id = int(record["pad_id"]), record["eos_id"]
            self.vocab_size = int(record["vocab_size"])

    @property
    def vocab(self) -> int:
        """The vocabulary size the ids come from (a text tower's embedding rows: the largest id + 1, not the count
        of a pruned vocabulary); 0 when there are no ids."""
        return self.vocab_size

    def fill(self, fields: dict[str, Any], keys: np.ndarray, lap: Lap) -> Failures:
        """The batch's text fields into ``fields``; the samples it could not read, named."""
        failures: Failures = []
        with lap("text"):
            captions = self.data.captions.take(keys).to_pylist() if self.text or self.tokenizer else None
            if self.ids:
                failures += self._ids(fields, keys, captions)
            if self.text:
                fields["caption"] = captions
            if self.config.keys:
                fields["key"] = self.shards.table.table.column("key").take(keys).to_pylist()
            if self.config.json_fields:
                fields["json"], failed = self._json(keys)
                failures += failed
        lap.items = len(keys)
        lap.flush()
        return failures

    def _ids(self, fields: dict[str, Any], keys: np.ndarray, captions: list[str] | None) -> Failures:
        """``input_ids`` and ``attention_mask``, and the rows the tokenizer failed on or holding an id past the
        vocabulary."""
        failures: Failures = []
        if self.tokenizer is not None:
            rows = encoded_each(lambda texts: caption_rows(self.tokenizer, texts), captions or [])
            for row, encoded in enumerate(rows):
                if isinstance(encoded, TokenizerFailure):
                    failures.append((row, self.shards.sample_error(int(keys[row]), f"caption: {encoded.reason}")))
            rows = [[] if isinstance(row, TokenizerFailure) else row for row in rows]
            lengths = np.array([len(row) for row in rows], dtype=np.int64)
            ids = np.full((len(rows), padded_width(lengths, self.config.pad_multiple)), self.pad_id, dtype=np.int64)
            for i, row in enumerate(rows):
                ids[i, :len(row)] = row
            mask = (np.arange(ids.shape[1])[None, :] < lengths[:, None]).astype(np.int64)
            largest = int(ids.max()) if ids.size else 0
        else:
            batch, largest = padded_rows(self.data.tokens, keys, self.config.pad_multiple, self.pad_id)
            ids, mask, lengths = batch["input_ids"], batch["attention_mask"], batch["lengths"]
        named = {row for row, _ in failures}
        failures += self._empty(keys, lengths, named)
        if self.vocab_size and largest >= self.vocab_size:  # the rare path: find the rows
            for row in np.flatnonzero(((ids >= self.vocab_size) & (mask == 1)).any(axis=1)).tolist():
                failures.append((row, self.shards.sample_error(int(keys[row]), "caption token id "
                                 f"{int(ids[row][mask[row] == 1].max())} >= vocabulary size {self.vocab_size}")))
        last = None if self.eos_id is None else np.full(len(keys), int(self.eos_id), dtype=np.int64)
        fields["input_ids"], fields["attention_mask"] = cut_rows(ids, mask, lengths, self.config, self.pad_id, last)
        return failures

    def _empty(self, keys: np.ndarray, lengths: np.ndarray, named: set[int]) -> Failures:
        """The rows of no token (a tokenizer that knows none of the caption's characters, ids packed without BOS and
        EOS) not ``named`` already: an all-zero attention mask makes a text tower's softmax NaN, so each is its
        sample's error."""
        return [(row, self.shards.sample_error(int(keys[row]), "caption gives no token ids (none stored, or none from "
                                               "the tokenizer)"))
                for row in np.flatnonzero(lengths == 0).tolist() if row not in named]

    def _json(self, keys: np.ndarray) -> tuple[list[dict[str, Any] | None], Failures]:
        """Each sample's chosen ``.json`` fields (None without metadata), and the samples whose ``.json`` failed."""
        out: list[dict[str, Any] | None] = []
        failures: Failures = []
        files, table, names = self.shards.files, self.shards.table, self.config.json_fields
        for position, sample in enumerate(keys.tolist()):
            offset, size = int(self.data.json_offset[sample]), int(self.data.json_size[sample])
            if offset < 0:
                out.append(None)
                continue
            try:
                if size > MAX_META_BYTES:  # a tampered table: never allocate what it claims
                    raise ValueError(f"{size:,} bytes, larger than metadata is ({MAX_META_BYTES:,} at most)")
                meta = json.loads(files.read(int(table.shard[sample]), offset, size))
                if not isinstance(meta, dict):
                    raise ValueError(f"a JSON {type(meta).__name__}, not an object")
            except (*DATA_EXCEPTIONS, RecursionError, ShardError) as e:  # ShardError: a range past the shard's end
                failures.append((position, self.shards.sample_error(sample, f"its .json: {type(e).__name__}: {e}")))
                out.append(None)
                continue
            out.append({name: meta.get(name) for name in names})
        return out, failures
