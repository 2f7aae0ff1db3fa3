"""What a text conversion counts as it goes (``TextTotals``) and reports at its end (``rejected.json``, the manifest).

The totals are journaled at each shard boundary (``convert_journal``), so a rerun resumes from there with the
same counts. A rerun re-reads the documents of the kept shards to count skipped input again, but does not
re-encode them: the documents the tokenizer failed on (a user's regex pre-tokenizer that panics) are therefore
counted in the totals, with their few examples, not in ``SourceStats``, and join its skipped kinds at the end.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dataio.formats.dataset.manifest import Manifest, ShardEntry
from dataio.formats.errors import NothingConverted
from dataio.formats.files import write_atomic
from dataio.formats.kinds import kind_named
from dataio.formats.limits import REPORT_EXAMPLES
from dataio.formats.text.text_sources import SourceStats
from dataio.formats.text.tokenizer_setup import TokenizerInfo

REJECTED_TEXT_NAME = "rejected.json"
TOKENIZER_FAILED = "tokenizer_failed"  # the skipped kind of a document the tokenizer failed on


def length_bin(length: int) -> int:
    """The power-of-two bin of a row length: floor(log2(length)), 0 for 0."""
    return max(length, 1).bit_length() - 1


def length_histogram(bin_counts: list[int]) -> list[list[int]]:
    """[[lo, hi, count], ...] over the non-empty power-of-two bins [lo, hi]."""
    return [[1 << b, (1 << (b + 1)) - 1, int(c)] for b, c in enumerate(bin_counts) if c]


@dataclass
class TextTotals:
    """Running totals of a conversion, journaled at each shard boundary so a rerun resumes from there."""

    next_doc: int = 0  # position of the next row: document index ...
    next_part: int = 0  # ... and chunk of it (a split document can straddle shards)
    rows: int = 0
    tokens: int = 0
    split: int = 0
    bins: list[int] = field(default_factory=lambda: [0] * 33)
    tokenizer_failed: int = 0  # documents the tokenizer failed on (each takes a document index, no row) ...
    tokenizer_examples: list[str] = field(default_factory=list)  # ... and the first few, each FILE:LINE: why

    def add_row(self, length: int, doc: int, part: int, parts: int) -> None:
        self.rows += 1
        self.tokens += length
        self.bins[length_bin(length)] += 1
        self.split += part == 0 and parts > 1
        self.next_doc, self.next_part = (doc, part + 1) if part + 1 < parts else (doc + 1, 0)

    def reject(self, doc: int, where: Callable[[], str]) -> None:
        """Document ``doc`` the tokenizer failed on: counted, ``where`` kept as an example (called only then)."""
        self.tokenizer_failed += 1
        if len(self.tokenizer_examples) < REPORT_EXAMPLES:
            self.tokenizer_examples.append(where())
        self.next_doc, self.next_part = doc + 1, 0

    @property
    def documents(self) -> int:
        """Documents packed: those read past, less those the tokenizer failed on."""
        return self.next_doc - self.tokenizer_failed

    def into(self, stats: SourceStats) -> None:
        """The tokenizer's failures as one more skipped kind of ``stats`` (last: the same order after a resume)."""
        if self.tokenizer_failed:
            stats.skipped[TOKENIZER_FAILED] = self.tokenizer_failed
            stats.examples[TOKENIZER_FAILED] = list(self.tokenizer_examples)


def write_rejected(out: Path, stats: SourceStats) -> None:
    write_atomic(out / REJECTED_TEXT_NAME,
                 (json.dumps({"skipped": stats.skipped, "examples": stats.examples}, indent=1, sort_keys=True)
                  + "\n").encode())


def nothing_converted(sources: tuple[Path, ...], out: Path, stats: SourceStats) -> NothingConverted:
    """The one line of a whole conversion that packed no document, naming the tokenizer's first failure if it
    failed on every one."""
    where = ", ".join(map(str, sources))
    skipped = ", ".join(f"{n} {kind}" for kind, n in sorted(stats.skipped.items()))
    if set(stats.skipped) == {TOKENIZER_FAILED}:
        return NothingConverted(f"no document converted from {where}: the tokenizer failed on every one "
                                f"({stats.examples[TOKENIZER_FAILED][0]}); each is counted in "
                                f"{out / REJECTED_TEXT_NAME}")
    return NothingConverted(f"no document converted from {where}: " + (
        f"every one was skipped ({skipped}; listed in {out / REJECTED_TEXT_NAME})" if skipped
        else "they hold no text"))


def write_reports(out: Path, options: dict[str, Any], stats: SourceStats, shards: list[ShardEntry],
                  totals: TextTotals, info: TokenizerInfo, dtype: np.dtype) -> None:
    """``rejected.json``, then ``manifest.json`` (last: its presence marks a finished conversion); ``options``:
    the conversion's own (format, max_length, doc_sep)."""
    write_rejected(out, stats)
    options = {
        "format": options["format"],
        "num_documents": totals.documents,
        "num_tokens": totals.tokens,
        "max_length": options["max_length"],
        "split_documents": totals.split,
        "skipped": stats.skipped,
        "length_histogram": length_histogram(totals.bins),
        "token_dtype": dtype.name,
        "tokenizer": {"file": info.file, "sha256": info.sha256, "vocab_size": info.vocab_size,
                      "bos_id": info.bos_id, "eos_id": info.eos_id, "pad_id": info.pad_id},
        "doc_sep": options["doc_sep"],
        **({"shard_tokens": options["shard_tokens"]} if "shard_tokens" in options else {}),
    }
    Manifest(kind="text", num_samples=totals.rows, shards=tuple(shards), num_rejected=sum(stats.skipped.values()),
             sample_table="", options=options, fields=kind_named("tokens").part("fields")(options),
             sample_kind="tokens").write(out)
