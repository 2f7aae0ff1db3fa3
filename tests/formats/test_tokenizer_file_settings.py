"""A tokenizers JSON file saved with padding and truncation (as Hugging Face saves many models' files) packs
whole documents: dataio frames, cuts and pads ids itself, so the file's own settings are dropped on load."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers, trainers

import dataio

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ["the red circle sits on a blue square beside many other shapes of every colour",
             "another document about green triangles, the yellow cross and a purple background"]


def test_convert_text_with_a_fixed_length_tokenizer_file_stores_whole_documents(tmp_path):
    """Before, every document was cut at the file's truncation (6 tokens) and padded to its length (24) with
    the padding stored as tokens, silently; now each is its whole ids, as with the same file without them."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(DOCUMENTS, trainers.BpeTrainer(vocab_size=120, special_tokens=["<pad>", "<unk>"]))
    expected = [tokenizer.encode(document).ids for document in DOCUMENTS]
    tokenizer.enable_padding(pad_id=0, pad_token="<pad>", length=24)
    tokenizer.enable_truncation(max_length=6)
    tokenizer.save(str(tmp_path / "fixed_length.json"))
    (tmp_path / "corpus.txt").write_text("\n".join(DOCUMENTS) + "\n")
    done = subprocess.run([sys.executable, "-m", "dataio", "convert", "text", str(tmp_path / "corpus.txt"),
                           str(tmp_path / "out"), "--tokenizer", str(tmp_path / "fixed_length.json"), "--bos", "",
                           "--eos", "", "--no-progress"], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    stored = dataio.TokenDataset(tmp_path / "out")
    assert sorted(stored[i].tolist() for i in range(len(stored))) == sorted(expected)
    assert max(len(ids) for ids in expected) > 6
