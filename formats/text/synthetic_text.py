"""A generated text corpus with a natural spread of document lengths (no downloads).

Sentences are drawn from a small vocabulary with Zipf-like word frequencies;
document lengths follow a log-normal distribution, as in real web text
(many short documents, a long tail).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dataio.formats.file_gate import write_new

_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "shi", "po", "ve", "da", "en", "ar", "io", "ul", "be", "zo")


def _vocabulary(rng: np.random.Generator, size: int = 2000) -> list[str]:
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES, rng.integers(1, 4))))
    return sorted(words)


def synthetic_documents(count: int, *, seed: int = 0, mean_words: float = 120.0, sigma: float = 1.0) -> list[str]:
    """``count`` documents whose word counts are log-normal around ``mean_words``."""
    rng = np.random.default_rng(seed)
    words = _vocabulary(rng)
    weights = 1.0 / np.arange(1, len(words) + 1)
    weights /= weights.sum()
    mu = np.log(mean_words) - sigma ** 2 / 2
    lengths = np.maximum(1, rng.lognormal(mu, sigma, count).astype(int))
    documents = []
    for n in lengths:
        picks = rng.choice(len(words), n, p=weights)
        sentence_ends = set(np.cumsum(rng.integers(5, 15, n // 5 + 1)).tolist())
        text = []
        for i, w in enumerate(picks):
            token = words[w]
            text.append(token.capitalize() if i == 0 or i in sentence_ends else token)
            if i + 1 in sentence_ends or i == n - 1:
                text[-1] += "."
        documents.append(" ".join(text))
    return documents


def write_text_corpus(path: str | Path, count: int, *, seed: int = 0, mean_words: float = 120.0) -> Path:
    """Write ``count`` documents, one per line, to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_new(path, ("\n".join(synthetic_documents(count, seed=seed, mean_words=mean_words)) + "\n").encode("utf-8"))
    return path
