"""The token ids of a pair folder's captions, stored beside them at pack time (``--tokenizer`` or trained).

As ``dataio convert text`` does for documents: a ``tokenizers`` JSON file is loaded (or a byte-level BPE
trained on the captions packed, deterministic for the same captions, its EOS the largest id), or a user's
tokenizer object taken (open_clip's, a transformers fast tokenizer: ``client_tokenizers``). Each caption is
encoded by ``caption_rows``, the loader's own encoding: a tokenizer with a framing of its own (a file's
post-processor, ``[CLS] $A [SEP]``; open_clip's start and end of text) is stored as it encodes, one without
framed with ``--bos``/``--eos`` (a template post-processor, ``framed_copy``). The ids go into the sample table
as one list column (``input_ids``, the smallest unsigned type that holds the vocabulary, so the text path's C
collate pads them straight from the memory map); their lengths are the lists' own. The manifest records the
tokenizer (its file, sha256, vocabulary and special ids; a client's ``source`` name instead of a file), as a
text folder's does. A ``tokenizers`` tokenizer is saved as ``OUT/tokenizer.json``, framing and padding as the
stored ids are framed and padded, so that file on the loader's decode threads, or in any ``tokenizers`` user's
hands, gives exactly the stored ids. Tokenising is redone from the captions at the end of every run, so a
resumed conversion writes the same bytes.

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
from dataio.formats.errors import ConfigError, UsageError
from dataio.formats.remote.secrets import redact_path
from dataio.formats.text.client_tokenizers import ClientTokenizer, as_tokenizer, caption_rows, frames_itself
from dataio.formats.text.tokenizer_calls import TokenizerFailure, end_id, encoded_each, panic_reports_held
from dataio.formats.text.tokenizer_setup import TokenizerConfig, load_tokenizer, save_tokenizer, special_ids, \
    train_bpe


def given_tokenizer(config: TokenizerConfig) -> Any:
    """The tokenizer ``config`` names, loaded (a file, a user's object; None: one is to be trained): a bad one is
    one line naming it, checked before anything is written."""
    if config.path is not None:
        return load_tokenizer(config.path)
    return as_tokenizer(config.tokenizer) if config.tokenizer is not None else None


def checked_tokenizer(config: TokenizerConfig | None) -> None:
    """Load a given tokenizer once before anything is written: a bad file is one line naming it; a tokenizer to
    train without an EOS is refused (nothing would be at the largest id for CLIP-style pooling)."""
    if config is not None and config.train is not None and not config.eos:
        raise ConfigError("{0}: captions' trained tokenizer needs an EOS: CLIP-style text towers (open_clip's "
                          "text.argmax(dim=-1)) pool each caption at its largest id, the EOS trained last", "eos")
    if config is not None:
        given_tokenizer(config)


def framed_copy(tokenizer: Any, config: TokenizerConfig) -> Any:
    """A copy of ``tokenizer`` whose ``encode`` gives a caption's stored row: BOS and EOS added by a template
    post-processor. Unchanged when a special token is missing (``save_tokenizer`` names it)."""
    specials = [token for token in (config.bos, config.eos) if token]
    ids = {token: tokenizer.token_to_id(token) for token in specials}
    if any(value is None for value in ids.values()):
        return tokenizer
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.post_processor = TemplateProcessing(single=" ".join(t for t in (config.bos, "$A", config.eos) if t),
                                             special_tokens=list(ids.items()))
    return copy


def own_framing_ids(tokenizer: Any, config: TokenizerConfig) -> dict[str, int | None]:
    """The start, end and padding ids of a tokenizer that frames captions itself: the first and last tokens of its
    encoding when special, the padding ``config.pad``'s id, else the EOS's (as ``special_ids``)."""
    encoding = tokenizer.encode("a")
    mask, ids = encoding.special_tokens_mask, encoding.ids
    bos = int(ids[0]) if mask and mask[0] == 1 else None
    eos = end_id(tokenizer)
    pad = tokenizer.token_to_id(config.pad) if config.pad else None
    if pad is None and eos is None:
        raise ConfigError(f"the tokenizer {shown_name(config)} has no padding token {config.pad!r} and appends no "
                          "EOS to pad with instead (set {0} to a token it has)", "pad")
    return {"bos": bos, "eos": eos, "pad": eos if pad is None else int(pad)}


def shown_name(config: TokenizerConfig) -> str:
    """How errors name ``config``'s tokenizer: its file, its type, or ``(trained)``."""
    if config.path is not None:
        return str(redact_path(config.path))
    return type(config.tokenizer).__name__ if config.tokenizer is not None else "(trained)"


def _saved_record(tokenizer: Any, config: TokenizerConfig, out: Path, own: bool) -> dict[str, Any]:
    """Save a ``tokenizers`` tokenizer as ``OUT/tokenizer.json`` (padding with the stored padding id, so the file
    gives the loader's rows) or describe a client's (nothing saved: ``source`` names it); the manifest's record."""
    if isinstance(tokenizer, ClientTokenizer):
        return {"file": None, "source": tokenizer.name, "sha256": tokenizer.sha256,
                "vocab_size": tokenizer.vocab_size, "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id,
                "pad_id": tokenizer.pad_id}
    saved = Tokenizer.from_str(tokenizer.to_str())
    ids = own_framing_ids(tokenizer, config) if own else None
    if own:
        saved.enable_padding(pad_id=int(ids["pad"]), pad_token=tokenizer.id_to_token(int(ids["pad"])) or "<pad>")
        info = save_tokenizer(saved, out, config, ids=ids)
    else:
        ids = special_ids(tokenizer, config)  # a missing BOS/EOS/padding named before anything is written
        saved.enable_padding(pad_id=int(ids["pad"]), pad_token=tokenizer.id_to_token(int(ids["pad"])))
        info = save_tokenizer(saved, out, config)
    return {"file": info.file, "sha256": info.sha256, "vocab_size": info.vocab_size, "bos_id": info.bos_id,
            "eos_id": info.eos_id, "pad_id": info.pad_id}


def caption_ids(captions: list[str], config: TokenizerConfig, out: Path
                ) -> tuple[pa.Array | None, dict[str, Any], dict[int, str]]:
    """``(the input_ids list column of the captions encoded, the manifest's tokenizer record, {row: why the
    tokenizer failed on it})``; ``OUT/tokenizer.json`` written unless it failed on every caption (column None).
    Each row is ``caption_rows``' (the loader's encoding): a tokenizer that frames captions itself (a file's
    post-processor, open_clip's) as it is, any other framed with ``config``'s BOS and EOS."""
    tokenizer = given_tokenizer(config)
    if tokenizer is None:
        tokenizer = train_bpe(captions, config)
    own = frames_itself(tokenizer)
    if not own:
        tokenizer = framed_copy(tokenizer, config)
    with panic_reports_held() as held:  # a panic's report is its rejected line, not Rust's lines on stderr
        encoded = encoded_each(lambda texts: caption_rows(tokenizer, texts), captions)
        failed = {row: ids.reason for row, ids in enumerate(encoded) if isinstance(ids, TokenizerFailure)}
        held[0] = bool(failed)
    rows = [row for row in encoded if not isinstance(row, TokenizerFailure)]
    if not rows:
        return None, {}, failed
    record = _saved_record(tokenizer, config, out, own)
    vocab = int(record["vocab_size"])
    dtype = token_dtype(vocab)
    lengths = np.array([len(row) for row in rows], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)  # 64-bit: past 2**31 ids in all
    values = np.fromiter((i for row in rows for i in row), dtype=np.int64, count=int(lengths.sum()))
    if len(values) and (int(values.max()) >= vocab or int(values.min()) < 0):  # never stored wrapped
        bad = int(values.max()) if int(values.max()) >= vocab else int(values.min())
        raise UsageError(f"tokenizer {shown_name(config)} gave token id {bad}, outside its vocabulary of {vocab} ids")
    column = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), pa.array(values.astype(dtype)))
    return column, record, failed


def token_dtype_name(record: dict[str, Any]) -> str:
    """The declared dtype of the stored ids (``uint16`` ...), from the tokenizer record."""
    return token_dtype(int(record["vocab_size"])).name
