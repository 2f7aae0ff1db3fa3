"""The token ids of a pair folder's captions, stored beside them at pack time (``--tokenizer`` or trained).

As ``dataio convert text`` does for documents: a ``tokenizers`` JSON file is loaded (or a byte-level BPE
trained on the captions packed, deterministic for the same captions), saved as ``OUT/tokenizer.json``,
and each caption encoded (``encode_documents``: batch-encoded in bounded pieces) and framed with BOS and
EOS. The ids go into the sample table as one list column (``input_ids``, the smallest unsigned type that
holds the vocabulary, so the text path's C collate pads them straight from the memory map); their lengths
are the lists' own. The manifest records the tokenizer (its file, sha256, vocabulary and special ids), as
a text folder's does. The ``tokenizer.json`` saved frames and pads as the stored ids are framed and padded
(a post-processor adding BOS and EOS, the padding id), so that file on the loader's decode threads, or in
any ``tokenizers`` user's hands, gives exactly the stored ids (``framed_copy``). Tokenising is redone from
the captions at the end of every run, so a resumed conversion writes the same bytes.

A given tokenizer is the user's code (``tokenizer_calls``): a caption it fails on (a regex panic included) is
that pair's rejection, returned to the packer, and ``tokenizer.json`` is written only when some caption
encoded. The ids' dtype follows the largest id (``id_bound``), and an id past it is refused before storing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from tokenizers import Tokenizer
from tokenizers.processors import TemplateProcessing

from dataio.formats.dataset.text_shards import token_dtype
from dataio.formats.errors import UsageError
from dataio.formats.remote.secrets import redact_path
from dataio.formats.text.text_convert import encode_documents
from dataio.formats.text.tokenizer_calls import TokenizerFailure, encoded_each, panic_reports_held
from dataio.formats.text.tokenizer_setup import TokenizerConfig, load_tokenizer, save_tokenizer, train_bpe


def checked_tokenizer(config: TokenizerConfig | None) -> None:
    """Load a given tokenizer once before anything is written: a bad file is one line naming it."""
    if config is not None and config.path is not None:
        load_tokenizer(config.path)


def framed_copy(tokenizer: Any, config: TokenizerConfig) -> Any:
    """A copy of ``tokenizer`` whose ``encode`` gives a caption's stored row: BOS and EOS added by a template
    post-processor (replacing any of its own: the stored ids are framed by ``config`` alone), padding with the
    stored padding id (``<pad>``, else EOS). Unchanged when a special token is missing (``save_tokenizer``
    names it)."""
    specials = [token for token in (config.bos, config.eos) if token]
    ids = {token: tokenizer.token_to_id(token) for token in specials}
    if any(value is None for value in ids.values()):
        return tokenizer
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.post_processor = TemplateProcessing(single=" ".join(t for t in (config.bos, "$A", config.eos) if t),
                                             special_tokens=list(ids.items()))
    pad = config.pad if config.pad and tokenizer.token_to_id(config.pad) is not None else config.eos
    if pad:
        copy.enable_padding(pad_id=tokenizer.token_to_id(pad), pad_token=pad)
    return copy


def caption_ids(captions: list[str], config: TokenizerConfig, out: Path
                ) -> tuple[pa.Array | None, dict[str, Any], dict[int, str]]:
    """``(the input_ids list column of the captions encoded, the manifest's tokenizer record, {row: why the
    tokenizer failed on it})``; ``OUT/tokenizer.json`` written unless it failed on every caption (column None)."""
    tokenizer = load_tokenizer(config.path) if config.path is not None else train_bpe(captions, config)
    with panic_reports_held() as held:  # a panic's report is its rejected line, not Rust's lines on stderr
        encoded = encoded_each(lambda texts: encode_documents(tokenizer, texts), captions)
        failed = {row: ids.reason for row, ids in enumerate(encoded) if isinstance(ids, TokenizerFailure)}
        held[0] = bool(failed)
    ids = [row for row in encoded if not isinstance(row, TokenizerFailure)]
    if not ids:
        return None, {}, failed
    info = save_tokenizer(framed_copy(tokenizer, config), out, config)
    dtype = token_dtype(info.vocab_size)
    head = np.array([] if info.bos_id is None else [info.bos_id], dtype=np.int64)
    tail = np.array([] if info.eos_id is None else [info.eos_id], dtype=np.int64)
    lengths = np.array([len(row) + len(head) + len(tail) for row in ids], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)  # 64-bit: past 2**31 ids in all
    values = np.concatenate([np.concatenate([head, row, tail]) for row in ids])
    if len(values) and (int(values.max()) >= info.vocab_size or int(values.min()) < 0):  # never stored wrapped
        bad = int(values.max()) if int(values.max()) >= info.vocab_size else int(values.min())
        shown = redact_path(config.path) if config.path is not None else "(trained)"
        raise UsageError(f"tokenizer {shown} gave token id {bad}, outside its vocabulary of {info.vocab_size} ids")
    column = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), pa.array(values.astype(dtype)))
    record = {"file": info.file, "sha256": info.sha256, "vocab_size": info.vocab_size, "bos_id": info.bos_id,
              "eos_id": info.eos_id, "pad_id": info.pad_id}
    return column, record, failed


def token_dtype_name(record: dict[str, Any]) -> str:
    """The declared dtype of the stored ids (``uint16`` ...), from the tokenizer record."""
    return token_dtype(int(record["vocab_size"])).name
