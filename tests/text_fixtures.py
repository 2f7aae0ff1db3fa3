"""Tiny generated text corpora and their conversions (no network: the tokenizer is trained on the spot)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataio.formats.text.synthetic_text import synthetic_documents
from dataio.formats.text.text_convert import ConvertTextConfig, convert_text
from dataio.formats.text.tokenizer_setup import TokenizerConfig

MAX_LENGTH = 96


def corpus_documents() -> list[str]:
    documents = synthetic_documents(300, seed=11, mean_words=40)
    documents[5] = "Unicode: héllo wörld, 日本語, emoji 🙂 and tabs\tinside."
    return documents


def convert(sources, out: Path, **options) -> Path:
    tokenizer = options.pop("tokenizer", TokenizerConfig(train="bpe", vocab_size=600))
    convert_text(ConvertTextConfig(sources=tuple(sources), out=out, tokenizer=tokenizer, max_length=MAX_LENGTH,
                                   progress=False, **options))
    return out


@pytest.fixture(scope="session")
def text_corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(corpus_documents()) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def text_shards(text_corpus, tmp_path_factory) -> Path:
    return convert([text_corpus], tmp_path_factory.mktemp("text") / "out", shard_tokens=4000)
