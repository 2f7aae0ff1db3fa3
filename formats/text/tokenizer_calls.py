"""A user's tokenizer called as untrusted code: its failures become one text's error, its ids are bounded.

A ``tokenizers`` tokenizer runs user-supplied Rust configuration (regex pre-tokenizers, templates): a regex
that exhausts Oniguruma's retry limit panics, and pyo3 raises that as ``pyo3_runtime.PanicException``, a
``BaseException`` that ``except Exception`` lets through (a 27-line traceback at pack time; at read time it
escaped the error policy). ``encoded_each`` encodes a batch, and when the batch fails encodes its texts one at a
time, so the failure is the one text's (pack: a rejected line; read: that sample's ``SampleError``).

``id_bound`` is what bounds every id: the largest id of the vocabulary and added tokens, plus one, not their
count (a pruned vocabulary keeps its ids: 300 entries with ids up to 70000 need 70001 embedding rows and
uint32 storage).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

Encoded = TypeVar("Encoded")
NOT_FAILURES = (KeyboardInterrupt, SystemExit, GeneratorExit)  # a user's stop, never a text's fault


@dataclass(frozen=True)
class TokenizerFailure:
    """Why the tokenizer could not encode one text (in one line)."""

    reason: str


def is_tokenizer_failure(error: BaseException) -> bool:
    """Whether ``error``, raised inside a tokenizer call, is the tokenizer's failure (panics included) rather
    than the user stopping the process."""
    return not isinstance(error, NOT_FAILURES)


def failure_reason(error: BaseException) -> str:
    """One line: the error's type and the first line of its message (a panic's message is Rust's own)."""
    text = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
    return f"the tokenizer failed on it ({type(error).__name__}: {text})" if text else \
        f"the tokenizer failed on it ({type(error).__name__})"


def encoded_each(encode: Callable[[list[str]], Sequence[Encoded]],
                 texts: list[str]) -> list[Encoded | TokenizerFailure]:
    """``encode(texts)``, or, when that fails, each text encoded alone: its result or its ``TokenizerFailure``."""
    try:
        return list(encode(texts))
    except BaseException as e:  # a PanicException is a BaseException
        if not is_tokenizer_failure(e):
            raise
    out: list[Encoded | TokenizerFailure] = []
    for text in texts:
        try:
            out.append(encode([text])[0])
        except BaseException as e:
            if not is_tokenizer_failure(e):
                raise
            out.append(TokenizerFailure(failure_reason(e)))
    return out


@contextmanager
def panic_reports_held() -> Iterator[list[bool]]:
    """Holds what is written to fd 2 meanwhile (set ``held[0] = True`` to drop it): Rust's panic hook writes its
    report (and, with ``RUST_BACKTRACE``, a backtrace of dozens of lines) straight to fd 2 before pyo3 raises;
    the report's message is the exception's, which the caller names in one line. Anything else written
    meanwhile is passed on. For a single-threaded packing step: fd 2 is the process's."""
    held = [False]
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield held
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if not held[0]:
                capture.seek(0)
                data = capture.read()
                if data:
                    os.write(2, data)


def id_bound(tokenizer: Any) -> int:
    """The largest id of ``tokenizer``'s vocabulary and added tokens, plus one: what bounds every id it gives."""
    ids = tokenizer.get_vocab(with_added_tokens=True).values()
    return max(ids, default=-1) + 1


def end_id(tokenizer: Any) -> int | None:
    """The special token ``tokenizer`` appends after a text (its post-processor's EOS, ``[SEP]``,
    ``<|endoftext|>``), or None when it appends none: a cut row then keeps its first tokens as they are."""
    try:
        encoding = tokenizer.encode("a")
    except BaseException as e:  # a tokenizer failing here fails on each caption later, named
        if not is_tokenizer_failure(e):
            raise
        return None
    mask = encoding.special_tokens_mask
    if not mask or mask[-1] != 1 or all(mask):
        return None
    return int(encoding.ids[-1])
