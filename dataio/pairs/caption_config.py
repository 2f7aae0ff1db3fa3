"""What ``ImageLoader(pair_folder, captions=CaptionConfig(...))`` yields beside each image of an image-text pair.

A pair folder's batches are dicts (``dataio.pairs.pair_batches``): ``image`` as a classification batch's
images (the same crops, decode, normalisation and device augmentation), ``sample_ids`` and ``repeated``,
and the text:

- ``input_ids`` and ``attention_mask`` ``(N, L)`` int64: the ids stored at pack time (``--tokenizer``),
  padded by the text path's C collate, or the captions tokenised on the decode threads by ``tokenizer``
  (a ``tokenizers`` JSON file or ``Tokenizer``, a transformers fast tokenizer, or open_clip's own, run under a
  lock: pure Python; its own special tokens added, as pack time stores them: ``client_tokenizers``). Rows are cut at
  ``max_length`` tokens, the last kept token then the EOS (as open_clip's tokenizer cuts), and padded to
  the batch's longest row rounded up to ``pad_multiple``, or to ``max_length`` with ``pad_to_max_length``
  (a fixed context, CLIP's 77).
- ``caption``: the strings, with ``text=True``, or alone when the folder has no ids and no ``tokenizer`` is
  given.
- ``output="tuple"``: each batch is open_clip's ``(images, input_ids)`` instead of the dict (its loops unpack
  ``images, texts = batch``); ``batch_transform`` still gets the dict, and may return that tuple itself.
- ``key`` (``keys=True``): each sample's key; ``json`` (``json_fields``): per sample a dict of those fields
  of its ``.json`` (img2dataset's ``url``, ``width``, ``original_width``, ``status`` ...), None where it
  has none.

``bucket=True`` makes each batch of captions of about one length (less padding): the epoch's order is
sorted by caption length within windows of ``image_sampling.BUCKET_WINDOW`` batches and the batches of each window
shuffled (``dataio.sampling.length_buckets``), from ``(seed, epoch)`` alone, so resume stays exact.
"""

from __future__ import annotations

from dataclasses import dataclass, fields as dataclass_fields
from pathlib import Path
from typing import Any, Literal

from dataio.formats.errors import ConfigError
from dataio.formats.remote.secrets import redact
from dataio.formats.text.client_tokenizers import is_tokenizer_object



@dataclass(frozen=True, kw_only=True)
class CaptionConfig:
    """The text of an image-text pair batch (the module's docstring says each field's output)."""

    tokenizer: str | Path | Any | None = None  # tokenise on the decode threads; None: the stored ids, if any
    max_length: int | None = 77  # tokens kept per caption (EOS last); None: every token
    pad_to_max_length: bool = False  # every batch max_length wide (a fixed context) rather than its longest row
    pad_multiple: int = 8  # the padded width a multiple of this
    bucket: bool = False  # batches of captions of about one length
    text: bool = False  # the caption strings too, as ``caption``
    keys: bool = False  # each sample's key, as ``key``
    json_fields: tuple[str, ...] = ()  # these fields of each sample's .json, as ``json``
    output: Literal["dict", "tuple"] = "dict"  # batches as dicts, or open_clip's (images, input_ids)

    def __repr__(self) -> str:  # a tokenizer named by URL may carry credentials: never shown
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclass_fields(self))
        return redact(f"{type(self).__name__}({shown})")

    def __post_init__(self) -> None:
        if self.max_length is not None and (isinstance(self.max_length, bool) or self.max_length < 2):
            raise ConfigError(f"{{0}} must be >= 2 (room for BOS and EOS) or None, got {self.max_length!r}",
                              "max_length")
        if self.pad_to_max_length and self.max_length is None:
            raise ConfigError("{0} needs a max_length", "pad_to_max_length")
        if isinstance(self.pad_multiple, bool) or self.pad_multiple < 1:
            raise ConfigError(f"{{0}} must be >= 1, got {self.pad_multiple!r}", "pad_multiple")
        if self.output not in ("dict", "tuple"):
            raise ConfigError(f"{{0}} must be 'dict' or 'tuple' (open_clip's (images, input_ids)), got "
                              f"{self.output!r:.20}", "output")
        fields = tuple(self.json_fields) if not isinstance(self.json_fields, str) else (self.json_fields,)
        if not all(isinstance(name, str) and name for name in fields) or len(set(fields)) != len(fields):
            raise ConfigError(f"{{0}} must be distinct field names, got {self.json_fields!r}", "json_fields")
        object.__setattr__(self, "json_fields", fields)
        tokenizer = self.tokenizer
        if tokenizer is not None and not isinstance(tokenizer, (str, Path)) and not is_tokenizer_object(tokenizer):
            raise ConfigError(f"{{0}} must be a tokenizers JSON file, a tokenizers.Tokenizer, a transformers fast "
                              f"tokenizer or open_clip's, got {type(tokenizer).__name__}", "tokenizer")
