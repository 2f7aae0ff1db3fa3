"""``dataio convert text SRC... OUT``: tokenise a corpus once into token shards.

Documents come from .txt (one per line, or per blank-line-separated
paragraph), .jsonl or .parquet files (``formats.text_sources``). Each is
encoded with the tokenizer (``tokenizers``' batch encoder, which runs on all
cores and keeps input order, so the output does not depend on the thread
count), framed with BOS/EOS, and split into ``max_length`` chunks; splits are
counted, never silent truncation. Rows go to Arrow shards (default) or
WebDataset shards; ``manifest.json`` records counts, a length histogram, the
tokenizer's hash and per-shard checksums. Bad documents are counted and listed
(a few examples each) in ``rejected.json``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Literal

import numpy as np
from tqdm import tqdm

from dataio.errors import UsageError
from formats.convert_journal import check_output_folder
from formats.manifest import MANIFEST_NAME, Manifest, write_atomic
from formats.text_shards import ArrowTokenWriter, token_dtype
from formats.text_sources import Document, SourceStats, expand_sources, iter_documents
from formats.tokenizer_setup import TOKENIZER_NAME, TokenizerConfig, load_tokenizer, save_tokenizer, train_bpe
from formats.wds_shards import ShardWriter

REJECTED_TEXT_NAME = "rejected.json"
ENCODE_CHUNK = 2048  # documents per batch-encode call
_TEXT_OUTPUTS = ("text-*.arrow", ".text-*", "shard-*.tar", "shard-*.idx", ".shard-*", TOKENIZER_NAME,
                 MANIFEST_NAME, REJECTED_TEXT_NAME)


@dataclass(frozen=True, kw_only=True)
class ConvertTextConfig:
    """Options of ``dataio convert text``."""

    sources: tuple[Path, ...]
    out: Path
    tokenizer: TokenizerConfig
    doc_sep: Literal["line", "blank"] = "line"
    field: str = "text"
    max_length: int = 2048
    format: Literal["arrow", "wds"] = "arrow"
    shard_tokens: int = 50_000_000
    overwrite: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", tuple(Path(p) for p in self.sources))
        object.__setattr__(self, "out", Path(self.out))
        if not self.sources:
            raise UsageError("no source files given")
        if self.max_length < 2:
            raise UsageError(f"--max-length must be >= 2, got {self.max_length}")
        if self.doc_sep not in ("line", "blank") or self.format not in ("arrow", "wds"):
            raise UsageError("--doc-sep is line|blank and --format is arrow|wds")
        if self.shard_tokens < 1:
            raise UsageError("--shard-tokens must be >= 1")


@dataclass
class ConvertTextSummary:
    documents: int
    samples: int
    tokens: int
    split_documents: int
    skipped: dict[str, int]
    shards: int
    out: Path
    examples: dict[str, list[str]] = field(default_factory=dict)

    def line(self) -> str:
        skipped = ", ".join(f"{n} {kind}" for kind, n in sorted(self.skipped.items())) or "none"
        return (f"packed {self.documents} documents into {self.samples} samples ({self.tokens:,} tokens) in "
                f"{self.shards} shards at {self.out}; {self.split_documents} documents split at max length; "
                f"skipped: {skipped}")


def length_histogram(lengths: np.ndarray) -> list[list[int]]:
    """[[lo, hi, count], ...] over power-of-two bins [lo, hi]."""
    if len(lengths) == 0:
        return []
    bins = np.floor(np.log2(np.maximum(lengths, 1))).astype(np.int64)
    counts = np.bincount(bins)
    return [[1 << b, (1 << (b + 1)) - 1, int(c)] for b, c in enumerate(counts) if c]


def frame_and_split(ids: list[int], bos: int | None, eos: int | None, max_length: int) -> list[np.ndarray]:
    """BOS + ids + EOS, cut into chunks of at most ``max_length`` tokens."""
    framed = np.array(([bos] if bos is not None else []) + ids + ([eos] if eos is not None else []), dtype=np.int64)
    return [framed[i:i + max_length] for i in range(0, len(framed), max_length)]


def _chunks(documents: Iterator[Document], size: int) -> Iterator[list[Document]]:
    while chunk := list(islice(documents, size)):
        yield chunk


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def convert_text(config: ConvertTextConfig) -> ConvertTextSummary:
    """Tokenise ``config.sources`` into shards in ``config.out``; see the module docstring."""
    files = expand_sources(list(config.sources))
    tok = config.tokenizer
    tokenizer = load_tokenizer(tok.path) if tok.path else None  # fail on a bad tokenizer before touching OUT
    check_output_folder(config.out, config.overwrite, _TEXT_OUTPUTS)

    def documents(stats: SourceStats) -> Iterator[Document]:
        return iter_documents(files, doc_sep=config.doc_sep, field_name=config.field, stats=stats)

    if tokenizer is None:
        tokenizer = train_bpe((d.text for d in documents(SourceStats())), tok)
    info = save_tokenizer(tokenizer, config.out, tok)
    dtype = token_dtype(info.vocab_size)
    if config.format == "arrow":
        writer = ArrowTokenWriter(config.out, dtype, config.shard_tokens)
    else:
        writer = ShardWriter(config.out, max_bytes=max(8192, config.shard_tokens * dtype.itemsize * 2))
    stats = SourceStats()
    lengths: list[int] = []
    split = doc_index = 0
    bar = tqdm(unit="doc", desc="tokenise", disable=not config.progress)
    try:
        for chunk in _chunks(documents(stats), ENCODE_CHUNK):
            encodings = tokenizer.encode_batch([d.text for d in chunk], add_special_tokens=False)
            for encoding in encodings:
                parts = frame_and_split(encoding.ids, info.bos_id, info.eos_id, config.max_length)
                split += len(parts) > 1
                for part, ids in enumerate(parts):
                    if config.format == "arrow":
                        writer.write(ids, doc_index, part)
                    else:
                        writer.write({"__key__": f"{doc_index:09d}_{part:04d}",
                                      "input_ids.npy": _npy_bytes(ids.astype(dtype)),
                                      "json": json.dumps({"length": len(ids), "doc": doc_index, "part": part})})
                    lengths.append(len(ids))
                doc_index += 1
            bar.update(len(chunk))
        writer.close()
    except BaseException:
        writer.abort()
        raise
    finally:
        bar.close()
    write_atomic(config.out / REJECTED_TEXT_NAME,
                 (json.dumps({"skipped": stats.skipped, "examples": stats.examples}, indent=1, sort_keys=True)
                  + "\n").encode())
    length_array = np.array(lengths, dtype=np.int64)
    Manifest(
        kind="text",
        num_samples=len(lengths),
        shards=tuple(writer.entries),
        num_rejected=sum(stats.skipped.values()),
        sample_table="",
        options={
            "format": config.format,
            "num_documents": doc_index,
            "num_tokens": int(length_array.sum()),
            "max_length": config.max_length,
            "split_documents": split,
            "skipped": stats.skipped,
            "length_histogram": length_histogram(length_array),
            "token_dtype": dtype.name,
            "tokenizer": {"file": info.file, "sha256": info.sha256, "vocab_size": info.vocab_size,
                          "bos_id": info.bos_id, "eos_id": info.eos_id, "pad_id": info.pad_id},
            "doc_sep": config.doc_sep,
        },
    ).write(config.out)
    return ConvertTextSummary(doc_index, len(lengths), int(length_array.sum()), split, dict(stats.skipped),
                              len(writer.entries), config.out, stats.examples)
