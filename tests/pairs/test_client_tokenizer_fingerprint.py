"""A client tokenizer's fingerprint (the manifest's ``sha256``) is what defines its encoding, the same in every
process: two folders indexed by two runs of ``--tokenizer open_clip:ViT-B-32`` record one tokenizer
(tests/user43/test_open_clip_tokenizer_folders.py runs open_clip itself; here a stand-in of its
``SimpleTokenizer`` holds a module-level ``clean_fn``, whose ``str()`` carries its address)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dataio.formats.text.client_tokenizers import as_tokenizer

STAND_IN = '''
import functools, sys, types
module = types.ModuleType("open_clip.tokenizer")
sys.modules["open_clip.tokenizer"] = module


def _clean_lower(text):
    return text.lower()


def _mask(text, shuffle=False):
    return text


class SimpleTokenizer:
    __module__ = "open_clip.tokenizer"

    def __init__(self, context_length=77, extra=()):
        words = ["a", "photo", "cat", *extra, "<start_of_text>", "<end_of_text>"]
        self.encoder = {word: i for i, word in enumerate(words)}
        self.bpe_ranks = {("c", "at"): 0, ("ph", "oto"): 1}
        self.sot_token_id, self.eot_token_id = len(words) - 2, len(words) - 1
        self.context_length = context_length
        self.clean_fn = _clean_lower
        self.reduction_fn = functools.partial(_mask, shuffle=True)

    def __call__(self, texts):
        raise NotImplementedError
'''


def _fingerprint(**options: object) -> str:
    namespace: dict = {}
    exec(STAND_IN, namespace)  # noqa: S102 - the test's own stand-in class
    return as_tokenizer(namespace["SimpleTokenizer"](**options)).sha256


def test_the_fingerprint_is_the_same_in_another_process():
    script = ("import sys; sys.path.insert(0, sys.argv[1]); "
              "from tests.pairs.test_client_tokenizer_fingerprint import _fingerprint; print(_fingerprint())")
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, "-c", script, root], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-1500:]
    assert done.stdout.strip() == _fingerprint()  # differed: str(clean_fn) holds the function's address


def test_the_fingerprint_follows_what_defines_the_encoding():
    base = _fingerprint()
    assert _fingerprint(context_length=64) != base
    assert _fingerprint(extra=("dog",)) != base
