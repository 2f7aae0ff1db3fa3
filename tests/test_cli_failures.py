"""Every failure is one clear line (issue 16 §6): the CLI, run as a user runs it, on bad input and bad invocations.

Each case runs ``python -m dataio ...`` in a subprocess and checks the exit
code (2: bad invocation, 1: data or output error), that stderr is exactly
one line naming the thing at fault, and that no traceback got out.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dataio.formats.images.synthetic import SyntheticImagesConfig, write_image_folder

TRAIN = ["--model", "small_cnn", "--image-size", "32", "--batch-size", "2", "--epochs", "1", "--workers", "1"]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATAIO_NUM_WORKERS": "1"}
    return subprocess.run([sys.executable, "-m", "dataio", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def work(tmp_path_factory, image_shards, pair_tars) -> Path:
    """A folder with the inputs of every case (relative names, so the messages are short)."""
    root = tmp_path_factory.mktemp("failures")
    (root / "afile").write_text("not a folder\n")
    junk = root / "junk" / "class0"
    junk.mkdir(parents=True)
    for i in range(3):
        (junk / f"bad{i}.jpg").write_bytes(b"not a jpeg at all" * (i + 1))
    (root / "empty.txt").write_text("\n   \n\n")
    (root / "tok.txt").write_text("some words to train on\n" * 20)
    os.symlink(image_shards, root / "shards")
    os.symlink(pair_tars, root / "pairs")  # img2dataset tars, indexed
    write_image_folder(root / "imgs", SyntheticImagesConfig(num_classes=1, images_per_class=2))
    for name, writer in (("corrupt", lambda p: p.write_bytes(os.urandom(3000))),
                         ("truncated", lambda p: p.write_bytes(_checkpoint_bytes()[:700])),
                         ("odd", lambda p: torch.save({"model": torch.zeros(10), "step": "x"}, p))):
        (root / name).mkdir()
        writer(root / name / "checkpoint.pt")
    return root


def _checkpoint_bytes() -> bytes:
    import io  # lazy: only this case needs a buffer

    buffer = io.BytesIO()
    torch.save({"model": {"w": torch.zeros(2000)}, "step": 3}, buffer)
    return buffer.getvalue()


CASES = [  # (id, args, exit code, words the one line must hold)
    ("convert-into-a-file", ["convert", "images", "imgs", "afile", "--no-progress"], 2, ["afile", "not a folder"]),
    ("convert-into-unwritable", ["convert", "images", "imgs", "/proc/self/no/out", "--no-progress"], 2,
     ["/proc/self/no/out", "cannot be written"]),
    ("images-all-rejected", ["convert", "images", "junk", "out-junk", "--no-progress"], 1,
     ["no image converted", "all 3 files were rejected", "rejected.jsonl"]),
    ("text-nothing-left", ["convert", "text", "empty.txt", "out-empty", "--train-tokenizer", "bpe",
                           "--vocab-size", "300", "--no-progress"], 1, ["no document converted", "empty.txt", "empty"]),
    ("vocab-size-2-32", ["convert", "text", "tok.txt", "out-vocab", "--train-tokenizer", "bpe",
                         "--vocab-size", "4294967296"], 2, ["--vocab-size", "4294967296"]),
    ("synth-into-a-file", ["synth", "afile", "--classes", "1", "--per-class", "1"], 2, ["afile", "not a folder"]),
    ("lr-nan", ["train", "--train", "shards", "--lr", "nan"], 2, ["--lr", "nan"]),
    ("lr-inf", ["train", "--train", "shards", "--lr", "inf"], 2, ["--lr", "inf"]),
    ("lr-negative", ["train", "--train", "shards", "--lr", "-0.5"], 2, ["--lr", "-0.5"]),
    ("device-tpu", ["train", "--train", "shards", "--device", "tpu"], 2, ["--device", "tpu"]),
    ("device-cuda-absent", ["train", "--train", "shards", "--device", "cuda:7", *TRAIN], 2,
     ["--device", "cuda:7", "CUDA"]),
    ("train-out-a-file", ["train", "--train", "shards", "--out", "afile", *TRAIN], 2, ["afile", "not a folder"]),
    ("checkpoint-corrupt", ["train", "--train", "shards", "--out", "corrupt", "--resume", *TRAIN], 1,
     ["corrupt/checkpoint.pt", "corrupted"]),
    ("checkpoint-truncated", ["train", "--train", "shards", "--out", "truncated", "--resume", *TRAIN], 1,
     ["truncated/checkpoint.pt", "truncated"]),
    ("checkpoint-odd-shape", ["train", "--train", "shards", "--out", "odd", "--resume", *TRAIN], 1,
     ["odd/checkpoint.pt", "does not fit"]),
    ("clip-on-classes", ["train", "--task", "clip", "--train", "shards", *TRAIN], 2,
     ["--task clip trains on image-text pairs", "shards holds images with classes", "dataio index"]),
    ("classify-on-pairs", ["train", "--task", "classify", "--train", "pairs", *TRAIN], 2,
     ["--task classify", "pairs holds image-text pairs", "--task clip"]),
]


@pytest.mark.parametrize("args, code, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_failure_is_one_line_and_an_exit_code(work, args, code, words):
    if "cuda:7" in args and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    result = run_cli(*args, cwd=work)
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr
    assert len(lines) == 1, result.stderr
    assert result.returncode == code, result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert "weights_only=False" not in result.stderr


def test_a_lone_surrogate_is_a_counted_rejection_not_the_end(tmp_path):
    lines = [json.dumps({"text": f"document number {i} has words"}) for i in range(20)]
    lines[7] = '{"text": "a lone \\ud800 surrogate"}'
    (tmp_path / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    result = run_cli("convert", "text", "corpus.jsonl", "out", "--train-tokenizer", "bpe", "--vocab-size", "300",
                     "--no-progress", cwd=tmp_path)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "skipped (lone_surrogate): corpus.jsonl:8" in result.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["options"]["num_documents"] == 19 and manifest["options"]["skipped"] == {"lone_surrogate": 1}


def test_a_second_converter_on_a_locked_out_is_refused(tmp_path):
    write_image_folder(tmp_path / "src", SyntheticImagesConfig(num_classes=1, images_per_class=2))
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("another process's file\n")
    with open(out / ".dataio.lock", "w") as lock:  # as a running converter holds it
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = run_cli("convert", "images", "src", "out", "--overwrite", "--no-progress", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "being written by another dataio process" in result.stderr and "out" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == [".dataio.lock", "keep.txt"]  # --overwrite deleted nothing
    done = run_cli("convert", "images", "src", "out", "--overwrite", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (out / ".dataio.lock").exists()
    assert run_cli("verify", "out", cwd=tmp_path).returncode == 0
