"""Which vocabulary a pair loader's ids come from, and a warning when two live pair loaders disagree.

``dataio train`` refuses a validation set whose ids come from another tokenizer than the train set's (the same
id is another word: recall is measured on noise). A user's own loop builds its loaders itself, so the same check
runs when a ``PairLoader`` is built: its vocabulary is compared with that of every other pair loader still alive
in the process, and a difference is one warning line naming both folders and both tokenizers. A warning, not a
refusal: two loaders of two unrelated models in one process are legitimate; ``check_same_tokenizer`` refuses.

A vocabulary is told apart by its tokens and their ids (a digest of the ``tokenizers`` vocabulary with added
tokens; for a client's tokenizer, its record's digest), not by the file's bytes: a folder's saved
``tokenizer.json`` carries its padding, the user's file does not, and both give the same ids.
"""

from __future__ import annotations

import hashlib
import json
import warnings
import weakref
from pathlib import Path
from typing import Any

from dataio.formats.errors import ConfigError
from dataio.formats.remote.secrets import redact
from dataio.formats.text.client_tokenizers import ClientTokenizer
from dataio.pairs.caption_batches import load_tokenizer

# the pair loaders alive in this process, each with its tokenizer (computed once: a vocabulary file is parsed)
_LIVE: weakref.WeakKeyDictionary[Any, tuple[str, str] | None] = weakref.WeakKeyDictionary()


def _vocabulary_digest(tokenizer: Any) -> str:
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    return hashlib.sha256(json.dumps(sorted(vocab.items())).encode()).hexdigest()


def tokenizer_of(loader: Any) -> tuple[str, str] | None:
    """``(name, vocabulary digest)`` of the tokenizer whose ids ``loader`` gives (stored, or tokenised as read);
    None when its batches carry no ids."""
    captions = loader.source.captions
    if not captions.ids:
        return None
    if isinstance(captions.tokenizer, ClientTokenizer):
        return captions.tokenizer.name, captions.tokenizer.sha256
    if captions.tokenizer is not None:
        given = captions.config.tokenizer
        return (str(given) if isinstance(given, str) or hasattr(given, "is_file") else type(given).__name__,
                _vocabulary_digest(captions.tokenizer))
    record = captions.data.tokenizer
    if record.get("source"):  # a client's tokenizer, named by its record
        return str(record["source"]), str(record["sha256"])
    path = Path(str(loader.folder)) / str(record.get("file") or "tokenizer.json")
    try:
        return f"its stored ids ({path.name})", _vocabulary_digest(load_tokenizer(path)[0])
    except ConfigError:  # no file to read (a remote folder, a hand-made table): its record's digest
        return "its stored ids", str(record.get("sha256"))


def _differs(first: Any, second: Any, a: tuple[str, str] | None = None, b: tuple[str, str] | None = None
             ) -> str | None:
    a, b = a or tokenizer_of(first), b or tokenizer_of(second)
    if a is None or b is None or a[1] == b[1]:
        return None
    return (f"pair loaders over {redact(str(first.folder))} and {redact(str(second.folder))} give ids of two "
            f"tokenizers ({redact(a[0])} and {redact(b[0])}): the same id is another word in each (pack both with "
            "one tokenizer, or give both CaptionConfig(tokenizer=...))")


def note_pair_loader(loader: Any) -> None:
    """Warn (one line) when ``loader``'s ids come from another vocabulary than a live pair loader's."""
    mine = tokenizer_of(loader)
    if mine is not None:
        for other, theirs in list(_LIVE.items()):
            problem = _differs(other, loader, theirs, mine)
            if problem is not None:
                warnings.warn(problem, UserWarning, stacklevel=3)
                break
    _LIVE[loader] = mine


def check_same_tokenizer(*loaders: Any) -> None:
    """Refuse (ConfigError naming both folders and tokenizers) pair loaders whose ids come from two tokenizers:
    a user's train and validation loaders, checked as ``dataio train`` checks its own."""
    for other in loaders[1:]:
        problem = _differs(loaders[0], other)
        if problem is not None:
            raise ConfigError(problem)
