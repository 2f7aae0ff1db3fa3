"""Lightning ``predict`` over a text loader shared with validation counts each of 41 documents once on 2 ranks,
as torch's loader with Lightning's ``UnrepeatedDistributedSampler`` (it counted a padding batch: the text loader
padded its shares as for validation)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from dataio.formats.text.synthetic_text import synthetic_documents
from dataio.formats.text.text_convert import ConvertTextConfig, convert_text
from dataio.formats.text.tokenizer_setup import TokenizerConfig

HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
DOCUMENTS = 41


@pytest.fixture(scope="module")
def forty_one_documents(tmp_path_factory) -> Path:
    """41 short documents (none cut by ``max_length``: one row each) in text shards."""
    root = tmp_path_factory.mktemp("forty_one_documents")
    (root / "corpus.txt").write_text("\n".join(synthetic_documents(DOCUMENTS, seed=3, mean_words=8)) + "\n")
    convert_text(ConvertTextConfig(sources=(root / "corpus.txt",), out=root / "out", max_length=96, progress=False,
                                   tokenizer=TokenizerConfig(train="bpe", vocab_size=300)))
    return root / "out"


def test_lightning_predict_over_a_shared_text_loader_reads_each_document_once(forty_one_documents, tmp_path):
    done = subprocess.run([sys.executable, str(HERE / "lightning_text_predict_script.py"), str(forty_one_documents),
                           str(tmp_path)], capture_output=True, text=True, timeout=240, cwd=tmp_path, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "reads all" not in done.stderr, done.stderr[-3000:]
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    predicted = [i for r in records for i in r["read"]["predict"]]
    assert sum(r["predictions"] for r in records) == DOCUMENTS  # before: 45, a padding batch of 4 repeats
    assert Counter(predicted) == Counter(range(DOCUMENTS))  # each document once, no padding repeat
    validated = [i for r in records for i in r["read"]["validate"]]  # validation: padded shares, every document
    assert Counter(i for i in validated if i >= 0) == Counter(range(DOCUMENTS)) and len(validated) > DOCUMENTS
