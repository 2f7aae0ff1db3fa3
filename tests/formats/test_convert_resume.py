"""Converter resumption: SIGKILL at random points, rerun, byte-identical output (images and text)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

import dataio.formats.text.text_convert as text_convert
from dataio.errors import UsageError
from dataio.formats.dataset.convert_journal import JOURNAL_DIR
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.text.synthetic_text import synthetic_documents
from dataio.formats.text.text_convert import ConvertTextConfig, convert_text
from dataio.formats.text.tokenizer_setup import TokenizerConfig
from tests.formats.journal_stop import Interrupted, interrupt_after

ROOT = Path(__file__).resolve().parents[2]


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def convert_command(src: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "dataio", "convert", "images", str(src), str(out), "--workers", "2",
            "--max-shard-samples", "2", "--no-progress"]


@pytest.fixture(scope="module")
def reference(image_folder, tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("reference") / "out"
    subprocess.run(convert_command(image_folder[0], out), check=True, capture_output=True, cwd=ROOT)
    return files_of(out)


def journal_records(out: Path) -> int:
    folder = out / JOURNAL_DIR
    return len(list(folder.glob("[0-9]*.json"))) if folder.is_dir() else 0


def run_until_killed(src: Path, out: Path, records: int, delay: float, command=convert_command) -> bool:
    """Start a conversion and SIGKILL it once ``records`` shards are journaled (+ ``delay`` s); True if killed."""
    process = subprocess.Popen(command(src, out), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while journal_records(out) < records and process.poll() is None:
        time.sleep(0.002)
    time.sleep(delay)  # usually mid-shard: a partial file is left behind
    killed = process.poll() is None
    if killed:
        os.kill(process.pid, signal.SIGKILL)
    assert process.wait() in (0, -signal.SIGKILL), "a rerun after a kill must not fail"
    return killed


def test_sigkill_at_random_points_then_rerun_is_byte_identical(image_folder, reference, tmp_path):
    out = tmp_path / "out"
    rng = random.Random(os.getpid())
    kills = sum(run_until_killed(image_folder[0], out, records, rng.uniform(0, 0.02)) for records in (2, 7, 13))
    assert kills >= 2, "the conversion outran the kills; make it longer"
    done = subprocess.run(convert_command(image_folder[0], out), capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert files_of(out) == reference
    assert not (out / JOURNAL_DIR).exists() and not list(out.glob(".*"))


def test_a_damaged_finished_shard_is_rewritten(image_folder, reference, tmp_path):
    out = tmp_path / "out"
    config = ConvertImagesConfig(src=image_folder[0], out=out, max_shard_samples=2, num_workers=1, progress=False)
    assert run_until_killed(image_folder[0], out, 4, 0.0)
    victim = out / "shard-000001.tar"
    data = bytearray(victim.read_bytes())
    data[600] ^= 0xFF
    victim.write_bytes(bytes(data))
    convert_images(config)
    assert files_of(out) == reference


def test_a_rerun_with_other_options_is_refused(image_folder, tmp_path):
    out = tmp_path / "out"
    (out / JOURNAL_DIR).mkdir(parents=True)
    (out / JOURNAL_DIR / "options.json").write_text('{"identity": "another conversion"}')
    with pytest.raises(UsageError, match="other options"):
        convert_images(ConvertImagesConfig(src=image_folder[0], out=out, num_workers=1, progress=False))


# Text: 1,500 documents, split at 96 tokens, in shards of about 300 tokens (hundreds of shards).
TEXT_OPTIONS = {"max_length": 96, "shard_tokens": 300}


def text_command(src: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "dataio", "convert", "text", str(src), str(out), "--train-tokenizer", "bpe",
            "--vocab-size", "600", "--max-length", "96", "--shard-tokens", "300", "--no-progress"]


def text_config(src: Path, out: Path, text_format: str = "arrow") -> ConvertTextConfig:
    return ConvertTextConfig(sources=(src,), out=out, tokenizer=TokenizerConfig(train="bpe", vocab_size=600),
                             format=text_format, progress=False, **TEXT_OPTIONS)


@pytest.fixture(scope="module")
def long_corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("long_corpus") / "corpus.txt"
    documents = synthetic_documents(1500, seed=5, mean_words=40)
    documents[7] = ""  # skipped input must be counted the same after a resume
    path.write_text("\n".join(documents) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def text_reference(long_corpus, tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("text_reference") / "out"
    subprocess.run(text_command(long_corpus, out), check=True, capture_output=True, cwd=ROOT)
    return files_of(out)


def test_text_sigkill_at_random_points_then_rerun_is_byte_identical(long_corpus, text_reference, tmp_path):
    out = tmp_path / "out"
    rng = random.Random(os.getpid())
    kills = sum(run_until_killed(long_corpus, out, records, rng.uniform(0, 0.01), text_command)
                for records in (3, 40, 120))
    assert kills >= 2, "the conversion outran the kills; make it longer"
    done = subprocess.run(text_command(long_corpus, out), capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert files_of(out) == text_reference
    assert not (out / JOURNAL_DIR).exists() and not list(out.glob(".*"))


@pytest.mark.parametrize("text_format", ["arrow", "wds"])
def test_text_resume_inside_a_split_document_and_without_retraining(long_corpus, tmp_path, monkeypatch, text_format):
    reference = files_of(convert_text(text_config(long_corpus, tmp_path / "reference", text_format)).out)
    seen = interrupt_after(monkeypatch, 10**9)
    convert_text(text_config(long_corpus, tmp_path / "probe", text_format))
    straddling = [i for i, totals in enumerate(seen) if totals["next_part"] > 0]
    assert straddling, "no shard boundary falls inside a split document; change the sizes"
    out = tmp_path / "out"
    for records in (straddling[0] + 1, straddling[-1] + 1):  # interrupt, then resume, twice
        interrupt_after(monkeypatch, records)
        with pytest.raises(Interrupted):
            convert_text(text_config(long_corpus, out, text_format))
        monkeypatch.undo()
    monkeypatch.setattr(text_convert, "train_bpe", lambda *a: pytest.fail("the saved tokenizer must be reused"))
    summary = convert_text(text_config(long_corpus, out, text_format))
    assert files_of(out) == reference
    assert summary.skipped == {"empty": 1}


def test_text_resume_with_a_damaged_tokenizer_starts_again(long_corpus, tmp_path, monkeypatch):
    out = tmp_path / "out"
    interrupt_after(monkeypatch, 5)
    with pytest.raises(Interrupted):
        convert_text(text_config(long_corpus, out))
    monkeypatch.undo()
    (out / "tokenizer.json").write_text("{}")
    # Retraining now gives another tokenizer, so a kept shard of the lost one would show in the bytes.
    train = text_convert.train_bpe
    monkeypatch.setattr(text_convert, "train_bpe", lambda texts, config: train(texts, replace(config, vocab_size=700)))
    reference = files_of(convert_text(text_config(long_corpus, tmp_path / "reference")).out)
    convert_text(text_config(long_corpus, out))
    assert files_of(out) == reference
