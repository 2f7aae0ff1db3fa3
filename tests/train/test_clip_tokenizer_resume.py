"""A CLIP run's checkpoint records its tokenizer: a resume with another one (same size, other ids) is refused in
one line naming both. Before: it went on without a word, feeding the text tower ids that meant other words."""

from __future__ import annotations

import hashlib

import torch

from dataio.formats.pairs.synthetic_pair_writers import write_img2dataset
from dataio.formats.pairs.synthetic_pairs import SyntheticPairsConfig
from tests.hostile_helpers import one_line_refusal, run_cli
from tests.pairs.tokenizer_makers import word_tokenizer

PAIRS = SyntheticPairsConfig(count=8, samples_per_shard=8, failed_fraction=0.0, seed=4)


def test_a_clip_resume_with_another_tokenizer_is_refused_naming_both(tmp_path):
    write_img2dataset(tmp_path / "tars", PAIRS)
    assert run_cli("index", "tars", "--no-progress", cwd=tmp_path).returncode == 0  # captions only
    first, other = word_tokenizer(tmp_path / "a.json"), word_tokenizer(tmp_path / "b.json", shift=5)
    assert first.get_vocab_size() == other.get_vocab_size() and first.get_vocab() != other.get_vocab()
    args = ("train", "--task", "clip", "--train", "tars", "--image-size", "32", "--batch-size", "4", "--epochs", "1",
            "--context-length", "8", "--out", "run", "--progress-every", "0")
    done = run_cli(*args, "--tokenizer", "a.json", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    saved = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    assert hashlib.sha256((tmp_path / "a.json").read_bytes()).hexdigest() in saved["tokenizer"]
    err = one_line_refusal(run_cli(*args, "--tokenizer", "b.json", "--resume", cwd=tmp_path, timeout=300))
    digests = [hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()[:16] for name in ("a.json", "b.json")]
    assert "a.json" in err and "b.json" in err and all(d in err for d in digests), err
    again = run_cli(*args, "--tokenizer", "a.json", "--resume", cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stderr  # the tokenizer that wrote it resumes
