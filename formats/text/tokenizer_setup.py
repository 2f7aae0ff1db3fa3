"""The tokenizer of a text conversion: a HF ``tokenizers`` JSON file, or one trained on the spot.

A trained tokenizer is byte-level BPE (GPT-2 style: every string encodes,
and decoding gives the text back) with the special tokens first. Either way
the tokenizer is saved into OUT, so data and tokenizer travel together, and
identified by the sha256 of its JSON.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from dataio.formats.bounded_read import read_at_most
from dataio.formats.errors import ConfigError, UsageError
from dataio.formats.file_gate import FileRefused
from dataio.formats.files import write_atomic
from dataio.formats.remote.secrets import redact_path
from dataio.formats.text.client_tokenizers import is_tokenizer_object
from dataio.formats.text.tokenizer_calls import id_bound

TOKENIZER_NAME = "tokenizer.json"
MAX_VOCAB_SIZE = 1 << 24  # 4294967296 aborts inside the Rust trainer; real vocabularies stay below 2**18


@dataclass(frozen=True, kw_only=True)
class TokenizerConfig:
    """Where the tokenizer comes from and which special tokens frame each document."""

    path: Path | None = None  # a tokenizers JSON file
    train: Literal["bpe"] | None = None
    tokenizer: Any = None  # pairs: a user's tokenizer object (``client_tokenizers.as_tokenizer``: open_clip's, HF's)
    vocab_size: int = 8192
    bos: str | None = "<s>"
    eos: str | None = "</s>"
    pad: str = "<pad>"

    def __post_init__(self) -> None:
        if sum(given is not None for given in (self.path, self.train, self.tokenizer)) != 1:
            raise ConfigError("give exactly one of {0}, {1} or {2}", "path", "train", "tokenizer")
        if self.tokenizer is not None and not is_tokenizer_object(self.tokenizer):
            raise ConfigError(f"{{0}} must be a tokenizers.Tokenizer, a transformers fast tokenizer or open_clip's, "
                              f"got {type(self.tokenizer).__name__}", "tokenizer")
        if self.train is not None and self.train != "bpe":
            raise ConfigError(f"{{0}} {self.train!r}: only 'bpe' is supported", "train")
        if self.vocab_size < 260:
            raise ConfigError(f"{{0}} must be >= 260 (256 bytes + specials), got {self.vocab_size}", "vocab_size")
        if self.vocab_size > MAX_VOCAB_SIZE:
            raise ConfigError(f"{{0}} must be <= {MAX_VOCAB_SIZE} (2**24), got {self.vocab_size}", "vocab_size")


@dataclass(frozen=True, kw_only=True)
class TokenizerInfo:
    """What the manifest records about the tokenizer."""

    file: str
    sha256: str
    vocab_size: int  # its largest id + 1 (``id_bound``), not its count: a pruned vocabulary keeps its ids
    bos_id: int | None
    eos_id: int | None
    pad_id: int


def _specials(config: TokenizerConfig) -> list[str]:
    return [t for t in (config.pad, config.bos, config.eos) if t]


def train_bpe(texts: Iterable[str], config: TokenizerConfig):
    """A byte-level BPE tokenizer trained on ``texts`` (deterministic for the same input), its EOS the largest id.

    The EOS is added after training, so it takes the id past every learnt token: CLIP-style text towers
    (open_clip's ``text.argmax(dim=-1)``) pool each row at its largest id, CLIP's EOT. Trained first among the
    special tokens, the EOS was id 2 and those towers pooled a word (or the padding) in every row."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    first = [token for token in _specials(config) if token != config.eos]
    trainer = trainers.BpeTrainer(vocab_size=config.vocab_size - (1 if config.eos else 0), special_tokens=first,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    if config.eos:
        tokenizer.add_special_tokens([config.eos])
    return tokenizer


# A tokenizers JSON file past this is refused (the largest public ones, 256k-token vocabularies, are tens
# of MB), unread if its size says so, else one byte past it: Tokenizer.from_file read a 20 GB file whole.
MAX_TOKENIZER_BYTES = 256 << 20


def read_tokenizer_text(path: Path) -> str:
    """A tokenizers JSON file's text: a regular file (a FIFO would block the read for ever, a device read on) of at
    most ``MAX_TOKENIZER_BYTES``; UsageError naming the file (without a URL's credentials) otherwise."""
    shown = redact_path(path)
    if not path.is_file():
        raise UsageError(f"tokenizer {shown} " + ("is not a regular file" if path.exists() else "does not exist"))
    try:
        return read_at_most(path, MAX_TOKENIZER_BYTES).decode("utf-8")
    except FileRefused as e:  # too large, or swapped for a FIFO since the check above
        raise UsageError(f"tokenizer {shown}: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"tokenizer {shown}: cannot read ({getattr(e, 'strerror', None) or e})") from None


def load_tokenizer(path: Path):
    """Load a tokenizers JSON file, without the padding and truncation it may be saved with (as Hugging Face
    saves many models' files): dataio frames, cuts and pads the ids itself, so a file's fixed length would
    silently cut every document and store its padding as tokens. UsageError naming the file if it is not one."""
    text = read_tokenizer_text(path)
    try:
        tokenizer = Tokenizer.from_str(text)
    except Exception as e:  # the Rust side raises a bare Exception for any parse error
        raise UsageError(f"{redact_path(path)}: not a tokenizers JSON file ({str(e)[:200]})") from None
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


MAX_TOKEN_ID = (1 << 32) - 1  # stored ids are at most uint32


def special_ids(tokenizer, config: TokenizerConfig) -> dict[str, int | None]:
    """The ids of ``config``'s BOS, EOS and padding tokens in ``tokenizer``, the padding falling back to the EOS;
    a ConfigError naming the tokenizer and the token it lacks, checked before anything is written. Without a
    padding token or an EOS to pad with it was id 0, silently: a real token of most vocabularies."""
    shown = redact_path(config.path) if config.path else "(trained)"
    ids = {name: tokenizer.token_to_id(token) if token else None
           for name, token in (("bos", config.bos), ("eos", config.eos), ("pad", config.pad))}
    for name in ("bos", "eos"):
        token = getattr(config, name)
        if token and ids[name] is None:
            raise ConfigError(f"the tokenizer {shown} has no {name.upper()} token {token!r} (set {{0}} to one it "
                              "has, or {1})", name, f"{name}=None")
    if ids["pad"] is None:
        if ids["eos"] is None:
            lacks = f"no padding token {config.pad!r}" if config.pad else "no padding token given"
            raise ConfigError(f"the tokenizer {shown} has {lacks} and no EOS to pad with instead (set {{0}} to a "
                              "token it has, or {1} to one)", "pad", "eos")
        ids["pad"] = ids["eos"]
    return ids


def save_tokenizer(tokenizer, out: Path, config: TokenizerConfig,
                   ids: dict[str, int | None] | None = None) -> TokenizerInfo:
    """Save into ``out/tokenizer.json`` and describe it (ids of the special tokens, hash); its vocabulary size
    is its largest id + 1, which the stored ids' dtype follows. Special tokens it lacks are refused first;
    ``ids`` (bos, eos, pad) where the tokenizer frames captions itself rather than with ``config``'s tokens."""
    bound = id_bound(tokenizer)
    if bound - 1 > MAX_TOKEN_ID:
        raise UsageError(f"tokenizer {redact_path(config.path) if config.path else '(trained)'}: its largest id "
                         f"{bound - 1} does not fit the 32 bits token ids are stored in")
    ids = special_ids(tokenizer, config) if ids is None else ids
    text = tokenizer.to_str()
    write_atomic(out / TOKENIZER_NAME, text.encode("utf-8"))
    return TokenizerInfo(file=TOKENIZER_NAME, sha256=hashlib.sha256(text.encode()).hexdigest(),
                         vocab_size=bound, bos_id=ids["bos"], eos_id=ids["eos"], pad_id=int(ids["pad"]))
