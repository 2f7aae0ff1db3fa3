"""Tokenizers as users have them, and the one function that encodes captions with any of them.

``caption_rows`` is the one encoding of a caption: pack time stores what it gives (``caption_tokens``) and the
loader's decode threads tokenise with it (``dataio.pairs.caption_batches``), so one tokenizer gives one encoding
(pack time once encoded without the special tokens and framed with ``--bos``/``--eos``, read time applied the
file's own post-processor: a BERT-style file's ``[CLS] ... [SEP]`` became ``<s> ... </s>`` when stored).

What a user hands over (``as_tokenizer``), without importing its library here (duck-typed: the pytest process
and most users never import open_clip or transformers):

- a ``tokenizers.Tokenizer``, as it is;
- a ``transformers`` fast tokenizer (``AutoTokenizer``, ``PreTrainedTokenizerFast``): its ``backend_tokenizer``,
  which is what its ``__call__`` runs (post-processor included); Rust, so it runs on the decode threads;
- open_clip's own (``SimpleTokenizer`` from ``open_clip.get_tokenizer``, ``open_clip.tokenizer.HFTokenizer``):
  called as open_clip calls it, each row its ``context_length``-wide output without the padding. It is pure
  Python with a shared BPE cache (and HFTokenizer sets the backend's padding per call), so its calls hold a
  lock: correct on the decode threads, and no slower, since the GIL serialises pure Python anyway.

Anything else (a slow ``transformers`` tokenizer included) is one line naming its type.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dataio.formats.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class ClientTokenizer:
    """open_clip's tokenizer (``SimpleTokenizer`` or ``HFTokenizer``) and the facts dataio records of it."""

    name: str  # "open_clip:SimpleTokenizer": the manifest's ``source``
    call: Callable[[list[str]], Any] = field(repr=False)  # texts -> (N, context_length) ids, padded with pad_id
    pad_id: int
    bos_id: int | None
    eos_id: int | None
    vocab_size: int  # its largest id + 1
    sha256: str  # of its vocabulary and settings: what tells two tokenizers apart
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def rows(self, texts: list[str]) -> list[list[int]]:
        """Each text's ids: its row of the client's output up to its last token that is not padding (the EOS put
        back when the padding id is the EOS's)."""
        with self.lock:
            table = self.call(list(texts))
        out = []
        for row in table.tolist():
            end = len(row)
            while end and row[end - 1] == self.pad_id:
                end -= 1
            kept = row[:end]
            if self.eos_id == self.pad_id and self.eos_id is not None and end < len(row):
                kept.append(self.eos_id)
            out.append(kept)
        return out


def caption_rows(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """The ids of each caption as ``tokenizer`` (a ``tokenizers.Tokenizer`` or a ``ClientTokenizer``) gives them,
    its own special tokens included: what is stored at pack time and what the decode threads give."""
    if isinstance(tokenizer, ClientTokenizer):
        return tokenizer.rows(texts)
    return [encoding.ids for encoding in tokenizer.encode_batch(texts)]


def frames_itself(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` adds special tokens of its own (a post-processor's ``[CLS] $A [SEP]``, open_clip's
    start and end of text): its framing is then the stored one, ``--bos``/``--eos`` frame only the others."""
    if isinstance(tokenizer, ClientTokenizer):
        return True
    return tokenizer.num_special_tokens_to_add(False) > 0


def _is_open_clip(tokenizer: Any) -> bool:
    return type(tokenizer).__module__.split(".")[0] == "open_clip" and callable(tokenizer)


def _canonical(value: Any) -> Any:
    """``value`` as plain JSON that is the same in every process: a dict as its items sorted, a function as its
    qualified name, a ``functools.partial`` as its function and arguments. Never ``str()`` of an object, whose
    text holds its address (``<function _clean_lower at 0x7f..>``: a new fingerprint in every process)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        if all(isinstance(key, str) and isinstance(item, int) for key, item in value.items()):
            return {"items": sorted(value.items())}  # a vocabulary (49k entries): the fast path
        items = [[_canonical(key), _canonical(item)] for key, item in value.items()]
        return {"items": sorted(items, key=lambda pair: json.dumps(pair[0]))}
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    if isinstance(value, functools.partial):
        return {"partial": _canonical(value.func), "args": _canonical(value.args),
                "keywords": _canonical(value.keywords)}
    kind = value if hasattr(value, "__qualname__") else type(value)  # a function or class by name, else its type
    return f"{getattr(kind, '__module__', '')}.{kind.__qualname__}"


def _digest(*parts: Any) -> str:
    """sha256 of what defines a tokenizer's encoding, in a form that does not depend on the process."""
    return hashlib.sha256(json.dumps(_canonical(parts), separators=(",", ":")).encode()).hexdigest()


def _backend_settings(backend: Any) -> Any:
    """A ``tokenizers.Tokenizer``'s JSON without padding and truncation: ``HFTokenizer`` sets them on each call,
    so they would change the fingerprint between a fresh tokenizer and a used one; dataio pads and cuts itself."""
    settings = json.loads(backend.to_str())
    settings.pop("padding", None)
    settings.pop("truncation", None)
    return settings


def _open_clip_simple(tokenizer: Any) -> ClientTokenizer:
    """open_clip's ``SimpleTokenizer``: padding 0, ``sot_token_id``/``eot_token_id`` (the largest ids)."""
    vocab = tokenizer.encoder
    return ClientTokenizer(name=f"open_clip:{type(tokenizer).__name__}", call=tokenizer, pad_id=0,
                           bos_id=int(tokenizer.sot_token_id), eos_id=int(tokenizer.eot_token_id),
                           vocab_size=max(vocab.values()) + 1,
                           sha256=_digest(type(tokenizer).__name__, vocab, getattr(tokenizer, "bpe_ranks", None),
                                          tokenizer.context_length, getattr(tokenizer, "clean_fn", None),
                                          getattr(tokenizer, "reduction_fn", None)))


def _open_clip_hf(tokenizer: Any) -> ClientTokenizer:
    """open_clip's ``HFTokenizer``: its transformers tokenizer's padding, start and end ids."""
    inner = tokenizer.tokenizer
    pad = inner.pad_token_id
    vocab = inner.get_vocab()
    backend = getattr(inner, "backend_tokenizer", None)
    return ClientTokenizer(name=f"open_clip:{type(tokenizer).__name__}", call=tokenizer,
                           pad_id=int(pad) if pad is not None else 0,
                           bos_id=next((int(i) for i in (inner.bos_token_id, inner.cls_token_id) if i is not None),
                                       None),
                           eos_id=next((int(i) for i in (inner.eos_token_id, inner.sep_token_id) if i is not None),
                                       None),
                           vocab_size=max(vocab.values()) + 1,
                           sha256=_digest(type(tokenizer).__name__, _backend_settings(backend) if backend else vocab,
                                          tokenizer.context_length, getattr(tokenizer, "strip_sep_token", None)))


def as_tokenizer(tokenizer: Any) -> Any:
    """``tokenizer`` as dataio runs it: a ``tokenizers.Tokenizer`` (a private copy, without padding or truncation:
    dataio pads and cuts rows itself) or a ``ClientTokenizer``; ConfigError in one line for anything else."""
    from tokenizers import Tokenizer  # lazy: only tokenising users import it

    if _is_open_clip(tokenizer):
        if hasattr(tokenizer, "encoder") and hasattr(tokenizer, "eot_token_id"):
            return _open_clip_simple(tokenizer)
        if hasattr(getattr(tokenizer, "tokenizer", None), "get_vocab"):
            return _open_clip_hf(tokenizer)
    backend = getattr(tokenizer, "backend_tokenizer", None)  # a transformers fast tokenizer
    source = tokenizer if isinstance(tokenizer, Tokenizer) else backend
    if not isinstance(source, Tokenizer):
        slow = hasattr(tokenizer, "convert_tokens_to_ids")
        raise ConfigError(f"{{0}} must be a tokenizers JSON file, a tokenizers.Tokenizer, a transformers fast "
                          f"tokenizer or open_clip's; got {type(tokenizer).__name__}"
                          + (" (a slow transformers tokenizer: load it with use_fast=True)" if slow else ""),
                          "tokenizer")
    copy = Tokenizer.from_str(source.to_str())
    copy.no_padding()
    copy.no_truncation()
    return copy


def is_tokenizer_object(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` looks like one ``as_tokenizer`` takes (checked when a config is built; no import)."""
    return hasattr(tokenizer, "encode_batch") or hasattr(tokenizer, "backend_tokenizer") or _is_open_clip(tokenizer)
