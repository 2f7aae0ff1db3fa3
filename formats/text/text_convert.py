"""``dataio convert text SRC... OUT``: tokenise a corpus once into token shards.

Documents come from .txt (one per line, or per blank-line-separated
paragraph), .jsonl or .parquet files (``dataio.formats.text.text_sources``). Each is
encoded with the tokenizer (``tokenizers``' batch encoder, which runs on all
cores and keeps input order, so the output does not depend on the thread
count), framed with BOS/EOS, and split into ``max_length`` chunks; splits are
counted, never silent truncation. Rows go to Arrow shards (default) or
WebDataset shards; ``manifest.json`` records counts, a length histogram, the
tokenizer's hash and per-shard checksums. Bad documents are counted and listed
(a few examples each) in ``rejected.json``, documents the tokenizer fails on
(a user's regex pre-tokenizer panicking: ``tokenizer_calls``) among them; a
whole conversion that packs none leaves only that file. Killed at any point, the same
command resumes from the last finished shard with byte-identical output
(``dataio.formats.dataset.convert_journal``); a tokenizer trained by the interrupted run is
reused, after checking its hash.
"""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from dataclasses import field as dataclass_field  # the config has an option named "field"
from itertools import islice
from pathlib import Path
from typing import Literal

import numpy as np

from dataio.formats.progress import progress
from dataio.formats.errors import ConfigError, UsageError
from dataio.formats.dataset.convert_journal import Journal, ShardRecord, fingerprint
from dataio.formats.files import sha256_file
from dataio.formats.dataset.manifest import MANIFEST_NAME, ShardEntry
from dataio.formats.dataset.out_lock import locked_output
from dataio.formats.ranks.rank_merge import merge_if_complete
from dataio.formats.ranks.rank_split import rank_folder, rank_range
from dataio.formats.dataset.text_shards import ArrowTokenWriter, token_dtype
from dataio.formats.text.doc_ids import first_doc_id
from dataio.formats.remote.source_files import RemoteRoot, remote_root
from dataio.formats.text.text_sources import (Document, SourceStats, TextPiece, expand_sources, iter_documents,
                                         join_pieces, text_pieces)
from dataio.formats.text.text_reports import (REJECTED_TEXT_NAME, TextTotals, nothing_converted, write_rejected,
                                              write_reports)
from dataio.formats.text.tokenizer_calls import TokenizerFailure, encoded_each, panic_reports_held
from dataio.formats.text.tokenizer_setup import (TOKENIZER_NAME, TokenizerConfig, load_tokenizer, save_tokenizer,
                                                 special_ids, train_bpe)
from dataio.formats.dataset.wds_shards import ShardWriter

ENCODE_CHUNK = 2048  # documents per batch-encode call ...
BATCH_CHARS = 1 << 20  # ... or fewer, once they hold this many characters
PIECE_CHARS = 1 << 16  # longer documents are encoded in pieces of at most this many characters
_TEXT_OUTPUTS = ("text-*.arrow", ".text-*", "shard-*.tar", "shard-*.idx", ".shard-*", TOKENIZER_NAME,
                 MANIFEST_NAME, REJECTED_TEXT_NAME)


@dataclass(frozen=True, kw_only=True)
class ConvertTextConfig:
    """Options of ``dataio convert text``."""

    sources: tuple[Path | RemoteRoot, ...]  # local paths, or URLs (s3://.../*.jsonl)
    out: Path
    tokenizer: TokenizerConfig
    doc_sep: Literal["line", "blank"] = "line"
    field: str = "text"
    max_length: int = 2048
    format: Literal["arrow", "wds"] = "arrow"
    shard_tokens: int = 50_000_000
    overwrite: bool = False
    progress: bool = True
    rank: int = 0  # of a multi-node conversion: this process packs its share into OUT/rank-R-of-N
    world_size: int = 1
    tokenizer_wait: float = 3600.0  # seconds a rank > 0 waits for the tokenizer rank 0 trains
    storage_options: dict | None = dataclass_field(default=None, repr=False)  # URL sources' backend options (secrets)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", tuple(remote_root(p, self.storage_options) or Path(p)
                                                  for p in self.sources))  # a URL read through the storage layer
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise ConfigError(f"{{0}} must be in 0..{{1}}-1, got {self.rank} of {self.world_size}", "rank", "world_size")
        object.__setattr__(self, "out", Path(self.out))
        if not self.sources:
            raise UsageError("no source files given")
        if self.max_length < 2:
            raise ConfigError(f"{{0}} must be >= 2, got {self.max_length}", "max_length")
        if self.tokenizer.tokenizer is not None:  # documents are framed per piece: a file or a trained BPE only
            raise ConfigError("{0}: convert text takes a tokenizers JSON file or a trained BPE, not a tokenizer "
                              "object (save a transformers tokenizer's backend_tokenizer to a file)", "tokenizer")
        if self.doc_sep not in ("line", "blank"):
            raise ConfigError(f"{{0}} must be line or blank, got {self.doc_sep!r}", "doc_sep")
        if self.format not in ("arrow", "wds"):
            raise ConfigError(f"{{0}} must be arrow or wds, got {self.format!r}", "format")
        if self.shard_tokens < 1:
            raise ConfigError(f"{{0}} must be >= 1, got {self.shard_tokens}", "shard_tokens")


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


def frame_and_split(ids: list[int] | np.ndarray, bos: int | None, eos: int | None,
                    max_length: int) -> list[np.ndarray]:
    """BOS + ids + EOS, cut into chunks of at most ``max_length`` tokens."""
    framed = np.concatenate([np.array([bos] if bos is not None else [], dtype=np.int64),
                             np.asarray(ids, dtype=np.int64),
                             np.array([eos] if eos is not None else [], dtype=np.int64)])
    return [framed[i:i + max_length] for i in range(0, len(framed), max_length)]


def split_text(text: str, limit: int = PIECE_CHARS) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, each cut before a space between two words.

    A byte-level BPE pre-tokenizer attaches a space to the word after it and
    merges nothing across words, so the pieces' tokens, concatenated, are the
    whole text's; a run of ``limit`` characters with no such space is cut
    where the limit falls. Deterministic: the same text gives the same pieces.
    """
    pieces: list[str] = []
    start = 0
    while len(text) - start > limit:
        cut = stop = start + limit
        while (cut := text.rfind(" ", start + 1, cut)) > start:
            if not text[cut - 1].isspace() and cut + 1 < len(text) and not text[cut + 1].isspace():
                break
        if cut <= start:
            cut = stop
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


def encode_documents(tokenizer, texts: list[str]) -> list[np.ndarray]:
    """The token ids of each text, encoded ``BATCH_CHARS`` characters at a time.

    A long text is encoded in pieces (``split_text``) and its ids are the
    pieces' ids concatenated, so memory stays bounded whatever a document's
    length (``tokenizers`` keeps offsets and token strings for every token
    of an encoding: a 50 MB line encoded whole needs 6.6 GB).
    """
    pieces: list[tuple[int, str]] = [(i, piece) for i, text in enumerate(texts) for piece in split_text(text)]
    ids: list[list[np.ndarray]] = [[] for _ in texts]
    start = 0
    while start < len(pieces):
        stop, size = start, 0
        while stop < len(pieces) and (stop == start or size + len(pieces[stop][1]) <= BATCH_CHARS):
            size += len(pieces[stop][1])
            stop += 1
        batch = pieces[start:stop]
        encodings = tokenizer.encode_batch([p for _, p in batch], add_special_tokens=False)
        for (owner, _), encoding in zip(batch, encodings, strict=True):
            ids[owner].append(np.array(encoding.ids, dtype=np.int64))
        start = stop
    return [parts[0] if len(parts) == 1 else np.concatenate(parts) for parts in ids]


def _chunks(documents: Iterator[Document], size: int) -> Iterator[list[Document]]:
    """Up to ``size`` documents at a time, fewer once they hold ``BATCH_CHARS`` characters."""
    while True:
        chunk: list[Document] = []
        chars = 0
        for document in documents:
            chunk.append(document)
            chars += len(document.text)
            if len(chunk) >= size or chars >= BATCH_CHARS:
                break
        if not chunk:
            return
        yield chunk


def _training_texts(documents: Iterator[Document]) -> Iterator[str]:
    """What the tokenizer trainer reads: each document, long ones in pieces (bounded memory)."""
    for document in documents:
        yield from split_text(document.text)


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _identity(config: ConvertTextConfig, pieces: list[TextPiece], first_doc: int) -> str:
    tok = config.tokenizer
    options = {name: getattr(config, name) for name in ("doc_sep", "field", "max_length", "format", "shard_tokens")}
    options.update({"first_doc": first_doc} if first_doc else {})  # one-process journals as before
    options["tokenizer"] = {"file_sha256": sha256_file(tok.path) if tok.path else None, "train": tok.train,
                            "vocab_size": tok.vocab_size, "bos": tok.bos, "eos": tok.eos, "pad": tok.pad}
    return fingerprint(options, [piece.key() for piece in pieces])


def _trained_tokenizer(config: ConvertTextConfig, journal: Journal,
                       train_on: Callable[[], Iterator[str]]) -> tuple[object, bool]:
    """The tokenizer this conversion trained before it was interrupted, or a new one.

    Returns (tokenizer, reused): shards kept from an interrupted run are only
    valid with the tokenizer that wrote them, whose hash the journal holds.
    """
    saved = config.out / TOKENIZER_NAME
    if saved.is_file() and journal.noted("tokenizer_sha256") == sha256_file(saved):
        return load_tokenizer(saved), True
    return train_bpe(train_on(), config.tokenizer), False


def _writer(config: ConvertTextConfig, dtype: np.dtype, first_index: int) -> ArrowTokenWriter | ShardWriter:
    if config.format == "arrow":
        return ArrowTokenWriter(config.out, dtype, config.shard_tokens, first_index=first_index)
    return ShardWriter(config.out, max_bytes=max(8192, config.shard_tokens * dtype.itemsize * 2),
                       first_index=first_index)


def _write_row(writer: ArrowTokenWriter | ShardWriter, ids: np.ndarray, doc: int, part: int,
               dtype: np.dtype) -> ShardEntry | None:
    """One row in the writer's format; returns the entry of a shard this closed."""
    if isinstance(writer, ArrowTokenWriter):
        return writer.write(ids, doc, part)
    return writer.write({"__key__": f"{doc:09d}_{part:04d}", "input_ids.npy": _npy_bytes(ids.astype(dtype)),
                         "json": json.dumps({"length": len(ids), "doc": doc, "part": part})})


def convert_text(config: ConvertTextConfig) -> ConvertTextSummary:
    """Tokenise ``config.sources`` into shards in ``config.out``; see the module docstring.

    Killed at any point, the same command resumes from the last finished
    shard (``dataio.formats.dataset.convert_journal``), with byte-identical output.
    With ``world_size`` > 1, only this rank's share of the corpus (``rank_split`` over ``text_pieces``: files
    cut at document boundaries, Parquet files at row groups), into ``OUT/rank-R-of-N``, with one tokenizer
    for all ranks (given, or trained by rank 0 on the whole corpus: ``shared_tokenizer``); the last rank
    to finish merges (``rank_merge``).
    """
    files = expand_sources(list(config.sources))
    if config.world_size == 1:  # a rank with no share is fine; a whole conversion of nothing is not
        return _tokenise(config, [TextPiece(path) for path in files], whole=True)
    pieces, sizes = text_pieces(files, config.world_size, doc_sep=config.doc_sep, field_name=config.field)
    start, stop = rank_range(np.array(sizes, dtype=np.int64), config.rank, config.world_size)
    tokenizer = config.tokenizer
    if tokenizer.path is None:
        tokenizer = replace(tokenizer, path=shared_tokenizer(config, files), train=None)
    summary = pack_text_piece(replace(config, tokenizer=tokenizer), text_piece(pieces, start, stop),
                              config.out / rank_folder(config.rank, config.world_size))
    merge_if_complete(config.out)
    return summary


def text_piece(pieces: list[TextPiece], start: int, stop: int) -> tuple[list[TextPiece], int]:
    """Units ``start:stop`` of a split conversion: their pieces joined, and their first document id (unique ids)."""
    return join_pieces(pieces[start:stop]), first_doc_id(pieces[:start])


def pack_text_piece(config: ConvertTextConfig, piece: tuple[list[TextPiece], int], out: Path) -> ConvertTextSummary:
    """A rank's share or a plan's item, with a given tokenizer, packed into its part folder ``out``."""
    part = replace(config, out=out, rank=0, world_size=1)
    part.out.mkdir(parents=True, exist_ok=True)
    return _tokenise(part, *piece)


def shared_tokenizer(config: ConvertTextConfig, files: list[Path]) -> Path:
    """``OUT/tokenizer.json``: trained by rank 0 on every file (as a one-process run would), awaited by the others.

    Every rank then converts with it as a given tokenizer, whose hash its journal and manifest hold,
    and the merge checks that all ranks used the same one.
    """
    path = config.out / TOKENIZER_NAME
    if config.rank == 0:
        return train_shared_tokenizer(config, files, config.out)
    deadline = time.monotonic() + config.tokenizer_wait
    if not path.is_file():
        print(f"rank {config.rank}: waiting for rank 0 to train the tokenizer ({path})", file=sys.stderr)
    while not path.is_file():
        if time.monotonic() > deadline:
            raise UsageError(f"rank {config.rank}: no tokenizer from rank 0 at {path} after "
                             f"{config.tokenizer_wait:.0f} s; run rank 0 first, or give one with --tokenizer")
        time.sleep(1.0)
    return path


def train_shared_tokenizer(config: ConvertTextConfig, files: list[Path], folder: Path) -> Path:
    """``folder/tokenizer.json``, trained on every file as a one-process run trains it (kept if already there)."""
    path = folder / TOKENIZER_NAME
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        texts = _training_texts(iter_documents(files, doc_sep=config.doc_sep, field_name=config.field,
                                               stats=SourceStats()))
        save_tokenizer(train_bpe(texts, config.tokenizer), folder, config.tokenizer)
    return path


def _tokenise(config: ConvertTextConfig, pieces: list[TextPiece], first_doc: int = 0,
              whole: bool = False) -> ConvertTextSummary:
    """The conversion of ``pieces`` (whole files, or a rank's parts of them, whose ``doc`` ids start at
    ``first_doc``: ``doc_ids``) into ``config.out``, holding its lock (``out_lock``). ``whole``: the whole
    conversion, which fails when it packs no document, leaving only ``rejected.json``."""
    with locked_output(config.out):
        return _tokenise_locked(config, pieces, first_doc, whole)


def _encoded(tokenizer, texts: list[str]) -> list[np.ndarray | TokenizerFailure]:
    """Each text's ids, or why the user's tokenizer failed on it (``tokenizer_calls``: a Rust panic included,
    whose report on stderr is held back when it is named as a rejection)."""
    with panic_reports_held() as held:
        encoded = encoded_each(lambda batch: encode_documents(tokenizer, batch), texts)
        held[0] = any(isinstance(ids, TokenizerFailure) for ids in encoded)
    return encoded


def _tokenise_locked(config: ConvertTextConfig, pieces: list[TextPiece], first_doc: int,
                     whole: bool) -> ConvertTextSummary:
    tok = config.tokenizer
    tokenizer = load_tokenizer(tok.path) if tok.path else None  # fail on a bad tokenizer before touching OUT
    if tokenizer is not None:
        special_ids(tokenizer, tok)  # ... or on a special token it lacks
    journal = Journal(config.out, _identity(config, pieces, first_doc))
    done = journal.start(config.out, config.overwrite, _TEXT_OUTPUTS, keep=(TOKENIZER_NAME,))

    def documents(stats: SourceStats) -> Iterator[Document]:
        return iter_documents(pieces, doc_sep=config.doc_sep, field_name=config.field, stats=stats)

    reused = tokenizer is not None  # a given tokenizer is part of the journal's identity
    if tokenizer is None:
        tokenizer, reused = _trained_tokenizer(config, journal, lambda: _training_texts(documents(SourceStats())))
    if done and not reused:  # the tokenizer of the kept shards is gone: start again
        done = journal.start(config.out, True, _TEXT_OUTPUTS)
    info = save_tokenizer(tokenizer, config.out, tok)
    journal.note("tokenizer_sha256", info.sha256)
    dtype = token_dtype(info.vocab_size)
    totals = TextTotals(**done[-1].totals) if done else TextTotals()
    writer = _writer(config, dtype, first_index=len(done))
    stats = SourceStats()
    remaining = documents(stats)
    for _ in islice(remaining, totals.next_doc):  # already in kept shards; read only to count skipped input
        pass
    resume_part = totals.next_part
    bar = progress(unit="doc", desc="tokenise", initial=totals.next_doc, enabled=config.progress)
    try:
        with writer:
            for chunk in _chunks(remaining, ENCODE_CHUNK):
                for document, ids in zip(chunk, _encoded(tokenizer, [d.text for d in chunk]), strict=True):
                    doc = totals.next_doc
                    if isinstance(ids, TokenizerFailure):  # journaled in the totals: a resume does not re-encode
                        totals.reject(doc, lambda: f"{document.source}:{document.number}: {ids.reason}")
                        resume_part = 0
                        continue
                    parts = frame_and_split(ids, info.bos_id, info.eos_id, config.max_length)
                    for part in range(resume_part, len(parts)):
                        entry = _write_row(writer, parts[part], first_doc + doc, part, dtype)
                        if entry is not None:  # totals still end before this row: the resume point
                            journal.add(writer.next_index - 1, ShardRecord(entry=asdict(entry), totals=asdict(totals)))
                        totals.add_row(len(parts[part]), doc, part, len(parts))
                    resume_part = 0
                    totals.next_doc, totals.next_part = doc + 1, 0
                bar.update(len(chunk))
            writer.close()
    finally:
        bar.close()
    totals.into(stats)
    if whole and totals.rows == 0:  # no half-written output: the list of what was skipped is all that stays
        write_rejected(config.out, stats)
        for name in _TEXT_OUTPUTS:
            for path in config.out.glob(name):
                if path.name != REJECTED_TEXT_NAME and path.is_file():
                    path.unlink()
        journal.finish()
        raise nothing_converted(config.sources, config.out, stats)
    shards = [ShardEntry(**record.entry) for record in done] + writer.entries
    # a split conversion's part records its shard rule: the merge's order shards (``shard_rule``)
    reported = ("format", "max_length", "doc_sep") if whole else ("format", "max_length", "doc_sep", "shard_tokens")
    write_reports(config.out, {name: getattr(config, name) for name in reported}, stats, shards, totals, info, dtype)
    journal.finish()
    return ConvertTextSummary(totals.documents, totals.rows, totals.tokens, totals.split, dict(stats.skipped),
                              len(shards), config.out, stats.examples)
