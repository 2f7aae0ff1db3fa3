"""The tokenizer a CLIP run records (checkpoint, resume refusal): a folder packed with a client's tokenizer stores
no file (manifest ``file: null``, ``source: "open_clip:SimpleTokenizer"``), so it is named by its source, not by
``FOLDER/None``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from dataio.train import checkpoint
from dataio.train.pair_loaders import _tokenizer_record


def stored(record: dict[str, Any]) -> Any:
    """A train pair loader whose folder's manifest holds ``record`` as its tokenizer."""
    return SimpleNamespace(folder="data/pairs", source=SimpleNamespace(captions=SimpleNamespace(
        data=SimpleNamespace(tokenizer=record))))


NO_FILE = SimpleNamespace(tokenizer=None)


def test_a_client_tokenizer_is_named_by_its_source():
    record = _tokenizer_record(NO_FILE, stored({"file": None, "source": "open_clip:SimpleTokenizer", "sha256": "ab"}))
    assert record == {"file": "open_clip:SimpleTokenizer", "sha256": "ab"}
    other = {"file": "data/pairs/tokenizer.json", "sha256": "cd"}
    line = checkpoint.tokenizer_mismatch(other, record)
    assert line is not None and "with open_clip:SimpleTokenizer (sha256 ab)" in line and "None" not in line


def test_a_stored_file_is_named_in_its_folder():
    assert _tokenizer_record(NO_FILE, stored({"file": "tokenizer.json", "sha256": "ab"})) == \
        {"file": "data/pairs/tokenizer.json", "sha256": "ab"}
    assert _tokenizer_record(NO_FILE, stored({"sha256": "ab"}))["file"] == "data/pairs/tokenizer.json"
