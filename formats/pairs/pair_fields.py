"""The declared fields of an image-text pair folder: the image, its caption, its metadata, its token ids.

A pair folder is an image folder (``kind="images"``: the same shards, sample table and readers) whose
samples have no class: the manifest declares ``caption`` (a UTF-8 string column of the sample table)
instead of ``label``, the ``json`` member (img2dataset's metadata, or the converter's; where it lies in
``json_offset``/``json_size``, -1 where a sample has none) and, when a tokenizer was given at pack time,
``input_ids`` (a list column of each caption's ids, BOS and EOS included: their lengths are the lists').
The table has no ``label`` column (a pair folder packed before December 2026 has one, ``NO_LABEL`` in every row,
which readers pass over).
"""

from __future__ import annotations

import unicodedata
from typing import Any

from dataio.formats.dataset.sample_fields import FieldSpec, image_field
from dataio.formats.limits import MAX_CAPTION_BYTES

NO_LABEL = -1  # the label of an input without a class (the walk's), and of older pair tables' label column
CAPTION = FieldSpec(name="caption", kind="text", dtype="utf-8")
META = FieldSpec(name="json", kind="json", dtype="json", stored="member")
TOKENS = "input_ids"
MAX_META_BYTES = 1 << 20  # a .json member larger than this is not img2dataset's metadata: not read


def pair_fields(image_dtype: str = "jpeg", token_dtype: str | None = None) -> tuple[FieldSpec, ...]:
    """The fields of a pair folder: its images' encoding, and the dtype of its stored token ids (None: none)."""
    fields = (FieldSpec(name="image", kind="image", dtype=image_dtype, stored="member"), CAPTION, META)
    if token_dtype is not None:
        fields += (FieldSpec(name=TOKENS, kind="tokens", dtype=token_dtype),)
    return fields


def declared_pair_fields(options: dict[str, Any]) -> tuple[FieldSpec, ...]:
    """The fields of a pair folder from its manifest's options: its images' encoding (``image_encoding``, JPEG when
    converted) and its stored ids' dtype (``token_dtype``, recorded with the tokenizer; none without one)."""
    token_dtype = options.get("token_dtype")
    return pair_fields(image_field(options).dtype, None if token_dtype is None else str(token_dtype))


def holds_pairs(fields: tuple[FieldSpec, ...]) -> bool:
    """Whether the samples are image-text pairs: a ``caption`` text field and no class (a classification folder
    may declare a caption column beside its labels: it stays a classification folder)."""
    return (any(f.name == CAPTION.name and f.kind == "text" for f in fields)
            and not any(f.kind == "class" for f in fields))


def caption_text(data: bytes | str, limit: int = MAX_CAPTION_BYTES) -> tuple[str, None] | tuple[None, str]:
    """``(text, None)`` when the bytes of a ``.txt`` member, a sidecar file or a Parquet row's value are a caption
    to pack, else ``(None, why)``: the one check of folder, tar and Parquet packing.

    A caption is UTF-8 text with printable content: text never holds NUL bytes (a UTF-16 caption without a
    byte-order mark is valid UTF-8, every ASCII letter followed by a NUL, and would be packed as gibberish), and
    one of only control characters (or only blanks and invisible format characters) says nothing, nor one of only
    U+FFFD (text decoded lossily before: what it said is lost). A leading byte-order mark is not text: it is
    dropped (a tokenizer would see another first word)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if len(data) > limit:
        return None, caption_too_long(len(data), limit)
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        return None, f"caption is not UTF-8 (byte 0x{data[e.start]:02x} at {e.start})"
    if "\0" in text:
        nuls = text.count("\0")
        if nuls == len(text):
            return None, f"caption is only NUL bytes ({nuls:,}), not text"
        return None, (f"caption holds {nuls:,} NUL bytes, which text never does (UTF-16 without a byte-order mark, "
                      "or binary data)")
    shown = "".join(c for c in text if unicodedata.category(c) != "Cf").strip()  # Cf: a BOM, zero-width spaces
    if not shown:
        return None, "empty caption"
    if all(unicodedata.category(c) in ("Cc", "Cf", "Zs") for c in shown):
        return None, "caption holds only control characters, no printable text"
    if all(c == "\ufffd" or unicodedata.category(c) in ("Cc", "Cf", "Zs") for c in shown):
        return None, "caption holds only U+FFFD replacement characters (text decoded lossily before), no text"
    return text, None


def caption_too_long(size: int, limit: int = MAX_CAPTION_BYTES) -> str:
    """The reason a caption of ``size`` bytes is not packed (said before reading it)."""
    return f"caption of {size:,} bytes is longer than the {limit:,} packed (--max-caption-bytes)"
