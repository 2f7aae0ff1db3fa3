"""The scale run's inputs, made fast: tiny JPEGs as many files in class folders, short documents in a few .txt
files, and one tokenizer trained once so every conversion of the run encodes with the same one.

Generating must not dominate the run: a few hundred distinct JPEG byte strings (16 to 32 px, a few hundred
bytes) are encoded once and written round-robin, so a million files cost a million small writes and no encoding.
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
from pathlib import Path

from dataio.formats.file_gate import write_atomic

from PIL import Image

DISTINCT_JPEGS = 300
CLASSES = 1000
TEXT_FILES = 4
MEAN_WORDS = 12  # short documents: one line each, well under --max-length
TOKENIZER_DOCUMENTS = 20_000
VOCAB_SIZE = 1000


def tiny_jpegs(count: int = DISTINCT_JPEGS, seed: int = 0) -> list[bytes]:
    """``count`` distinct small JPEGs: a flat colour of random size with a few random grey pixels."""
    rng = random.Random(seed)
    blobs = []
    for _ in range(count):
        side = rng.randint(16, 32)
        image = Image.new("RGB", (side, side), tuple(rng.randrange(256) for _ in range(3)))
        pixels = image.load()
        for _ in range(20):
            pixels[rng.randrange(side), rng.randrange(side)] = (rng.randrange(256),) * 3
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=80)
        blobs.append(buffer.getvalue())
    return blobs


def write_images(root: Path, images: int, classes: int = CLASSES) -> dict:
    """``images`` files in ``min(classes, images)`` class folders ``cNNNN/NNNNNNN.jpg`` (kept if complete)."""
    classes = max(1, min(classes, images))
    done = root / ".complete"
    if not done.is_file():
        blobs = tiny_jpegs()
        for c in range(classes):
            folder = root / f"c{c:04d}"
            folder.mkdir(parents=True, exist_ok=True)
            for j in range(c, images, classes):  # image j goes to class j mod classes: every class the same size
                (folder / f"{j:07d}.jpg").write_bytes(blobs[j % len(blobs)])
        write_atomic(done, str(images).encode())
    return {"images": images, "classes": classes, "bytes": _tree_bytes(root)}


def _tree_bytes(root: Path) -> int:
    return sum(entry.stat().st_size for folder in os.scandir(root) if folder.is_dir()
               for entry in os.scandir(folder.path))


def write_texts(root: Path, documents: int, dataio: list[str], env: dict[str, str]) -> dict:
    """``documents`` one-line documents in ``TEXT_FILES`` files (``dataio synth-text``, one seed each)."""
    root.mkdir(parents=True, exist_ok=True)
    files = []
    share, extra = divmod(documents, TEXT_FILES)
    for k in range(TEXT_FILES):
        count = share + (k < extra)
        if count == 0:
            continue
        path = root / f"docs-{k}.txt"
        if not path.is_file():
            _run([*dataio, "synth-text", str(path), "--documents", str(count), "--mean-words", str(MEAN_WORDS),
                  "--seed", str(k)], env)
        files.append(path)
    return {"documents": documents, "files": [p.name for p in files], "bytes": sum(p.stat().st_size for p in files)}


def train_tokenizer(work: Path, dataio: list[str], env: dict[str, str],
                    documents: int = TOKENIZER_DOCUMENTS) -> Path:
    """A BPE tokenizer trained once on a separate sample corpus of ``documents`` (``--train-tokenizer``)."""
    path = work / "tokenizer" / "tokenizer.json"
    if not path.is_file():
        sample = work / "tokenizer-sample.txt"
        _run([*dataio, "synth-text", str(sample), "--documents", str(documents), "--mean-words",
              str(MEAN_WORDS), "--seed", "99"], env)
        _run([*dataio, "convert", "text", str(sample), str(path.parent), "--train-tokenizer", "bpe", "--vocab-size",
              str(VOCAB_SIZE), "--no-progress", "--overwrite"], env)
    return path


def _run(command: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[-6:])} failed: {done.stderr.strip()[-1000:]}")
