"""A user's tokenizer at ``dataio convert text``, as a user runs it: nothing it does is trusted.

Before: a regex pre-tokenizer that panicked (``pyo3_runtime.PanicException``, a ``BaseException``) ended the
conversion in a traceback, shards and journal behind; a tokenizer with no padding token, and no EOS to pad with,
had its rows padded with id 0, a real token, silently."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pyarrow as pa
from tokenizers import Tokenizer, models, pre_tokenizers

from dataio.formats.dataset.convert_journal import JOURNAL_DIR
from tests.formats.test_convert_resume import files_of, run_until_killed
from tests.hostile_helpers import one_line_refusal, run_cli
from tests.pairs.tokenizer_makers import PANIC_ON_ALL, PANIC_ON_SQUARE, panics, word_tokenizer

COLOURS = "red green blue yellow black white purple orange".split()
SHAPES = ("circle", "triangle", "cross")  # never "square": the documents PANIC_ON_SQUARE passes
PANICKING = "a yellow square against a blue background"  # each panic costs ~0.3 s: a few only


def documents(count: int, failing: set[int], seed: int = 0) -> list[str]:
    """``count`` short documents of the word tokenizer's words, those at ``failing`` the one it panics on."""
    rng = random.Random(seed)
    return [PANICKING if i in failing else
            f"a {rng.choice(COLOURS)} {rng.choice(SHAPES)} on a {rng.choice(COLOURS)} background"
            for i in range(count)]


def corpus(path: Path, texts: list[str]) -> Path:
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return path


def read_ids(out: Path) -> list[list[int]]:
    manifest = json.loads((out / "manifest.json").read_text())
    return [row for shard in manifest["shards"]
            for row in pa.ipc.open_file(pa.memory_map(str(out / shard["file"]))).read_all()
            .column("input_ids").to_pylist()]


def test_a_tokenizer_panicking_on_some_documents_rejects_each_in_one_line(tmp_path):
    tokenizer = word_tokenizer(tmp_path / "panics.json", pattern=PANIC_ON_SQUARE)
    texts = documents(12, failing={2, 9})
    assert [i for i, text in enumerate(texts) if panics(tokenizer, text)] == [2, 9]
    corpus(tmp_path / "corpus.txt", texts)
    done = run_cli("convert", "text", "corpus.txt", "out", "--tokenizer", "panics.json", "--no-progress",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "panicked" not in done.stderr, done.stderr  # Rust's report held
    assert "packed 10 documents into 10 samples" in done.stdout and "skipped: 2 tokenizer_failed" in done.stdout
    rejected = json.loads((tmp_path / "out" / "rejected.json").read_text())
    assert rejected["skipped"] == {"tokenizer_failed": 2}
    assert [line.split(": ", 1)[0] for line in rejected["examples"]["tokenizer_failed"]] == \
        ["corpus.txt:3", "corpus.txt:10"]  # FILE:LINE of each, then why
    assert all("the tokenizer failed on it (PanicException: " in line
               for line in rejected["examples"]["tokenizer_failed"])
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["options"]["num_documents"] == manifest["num_samples"] == 10
    assert manifest["num_rejected"] == 2
    kept = [text for i, text in enumerate(texts) if i not in (2, 9)]
    assert read_ids(tmp_path / "out") == [[1, *tokenizer.encode(text).ids, 2] for text in kept]  # <s> ... </s>
    assert run_cli("verify", "out", "--deep", cwd=tmp_path).returncode == 0


def test_a_tokenizer_panicking_on_every_document_fails_in_one_line_leaving_no_files(tmp_path):
    tokenizer = word_tokenizer(tmp_path / "panics.json", pattern=PANIC_ON_ALL)
    texts = documents(3, failing=set())
    assert all(panics(tokenizer, text) for text in texts)
    corpus(tmp_path / "corpus.txt", texts)
    done = run_cli("convert", "text", "corpus.txt", "out", "--tokenizer", "panics.json", "--no-progress",
                   cwd=tmp_path)
    err = one_line_refusal(done)
    assert done.returncode == 1 and "the tokenizer failed on every one" in err and "PanicException" in err, err
    assert "(corpus.txt:1: the tokenizer failed on it (PanicException: " in err, err
    # what was skipped is all that is left: no shard, manifest, tokenizer, journal, lock or temporary file
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["rejected.json"]
    assert json.loads((tmp_path / "out" / "rejected.json").read_text())["skipped"] == {"tokenizer_failed": 3}


def convert_command(tokenizer: Path):
    def command(src: Path, out: Path) -> list[str]:
        return [sys.executable, "-m", "dataio", "convert", "text", str(src), str(out), "--tokenizer", str(tokenizer),
                "--max-length", "8", "--shard-tokens", "200", "--no-progress"]
    return command


def journaled_failures(out: Path) -> int:
    records = sorted((out / JOURNAL_DIR).glob("[0-9]*.json"))
    return json.loads(records[-1].read_text())["totals"]["tokenizer_failed"] if records else 0


def test_a_conversion_with_tokenizer_failures_killed_and_rerun_gives_the_same_output_and_rejected_list(tmp_path):
    """Documents of kept shards are not encoded again on a rerun: their failures come from the journal."""
    tokenizer = word_tokenizer(tmp_path / "panics.json", pattern=PANIC_ON_SQUARE)
    # 5,000 documents: three encode batches (2,048 each), failures in each, so a kill lands between them
    src = corpus(tmp_path / "corpus.txt", documents(5000, failing={3, 40, 2500, 2600, 4500}))
    command = convert_command(tmp_path / "panics.json")
    reference = run_cli(*command(src, tmp_path / "reference")[3:], cwd=tmp_path)
    assert reference.returncode == 0, reference.stderr
    expected = files_of(tmp_path / "reference")
    assert json.loads(expected["rejected.json"])["skipped"] == {"tokenizer_failed": 5}
    out = tmp_path / "out"
    assert run_until_killed(src, out, 30, 0.0, command), "the conversion outran the kill"
    assert journaled_failures(out) >= 2  # the kill came after shards whose totals hold failures
    done = run_cli(*command(src, out)[3:], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert files_of(out) == expected  # rejected.json and manifest included
    assert "skipped: 5 tokenizer_failed" in done.stdout


def no_pad_tokenizer(path: Path) -> Path:
    """A WordLevel tokenizer with BOS and EOS tokens but no padding token."""
    words = ("[UNK] <s> </s> a on the background " + " ".join(COLOURS) + " " + " ".join(SHAPES)).split()
    tokenizer = Tokenizer(models.WordLevel({word: i for i, word in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path))
    return path


def test_a_tokenizer_with_no_padding_token_and_no_eos_is_named_in_one_line(tmp_path):
    no_pad_tokenizer(tmp_path / "nopad.json")
    corpus(tmp_path / "corpus.txt", documents(4, failing=set()))
    done = run_cli("convert", "text", "corpus.txt", "out", "--tokenizer", "nopad.json", "--eos", "",
                   "--no-progress", cwd=tmp_path)
    err = one_line_refusal(done)
    assert done.returncode == 2 and "nopad.json" in err and "no padding token '<pad>'" in err, err
    assert "--pad" in err and "--eos" in err, err  # the flags that fix it
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())  # refused before writing
    # with its EOS, the padding falls back to it, as --pad's help says
    done = run_cli("convert", "text", "corpus.txt", "out2", "--tokenizer", "nopad.json", "--no-progress",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "out2" / "manifest.json").read_text())["options"]["tokenizer"]
    assert record["pad_id"] == record["eos_id"] == 2
