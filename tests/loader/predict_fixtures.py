"""Session fixtures of the 41-sample sets (an odd count that 2 ranks share unevenly, as issue 43's Lightning predict
over 41 images) and the one Lightning predict launch over them, read by tests/loader, tests/user43 and
tests/attack43. Imported by tests/conftest.py only: a fixture imported into several modules or conftests is a
fixture of each, built once per importer (the Lightning launch costs two processes' imports). Not a test module."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.text.synthetic_text import synthetic_documents
from dataio.formats.text.text_convert import ConvertTextConfig, convert_text
from dataio.formats.text.tokenizer_setup import TokenizerConfig
from tests.conftest import NUM_COLOURED
from tests.once_per_run import once_per_run

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def forty_one(coloured_folder, tmp_path_factory) -> Path:
    """41 of the coloured photos (the last 4 left out): an odd count that 2 ranks share unevenly, as issue 43's
    Lightning predict over 41 images."""
    root = tmp_path_factory.mktemp("forty_one")
    shutil.copytree(coloured_folder, root / "src")
    for i in range(41, NUM_COLOURED):
        (root / "src" / f"c{i % 3}" / f"img{i:03d}.jpg").unlink()
    convert_images(ConvertImagesConfig(src=root / "src", out=root / "out", max_shard_samples=7, num_workers=1,
                                       progress=False))
    return root / "out"


@pytest.fixture(scope="session")
def forty_one_documents(tmp_path_factory) -> Path:
    """41 short documents (none cut by ``max_length``: one row each) in text shards."""
    root = tmp_path_factory.mktemp("forty_one_documents")
    (root / "corpus.txt").write_text("\n".join(synthetic_documents(41, seed=3, mean_words=8)) + "\n")
    convert_text(ConvertTextConfig(sources=(root / "corpus.txt",), out=root / "out", max_length=96, progress=False,
                                   tokenizer=TokenizerConfig(train="bpe", vocab_size=300)))
    return root / "out"


@pytest.fixture(scope="session")
def lightning_predict(forty_one, forty_one_documents, tmp_path_factory, worker_id) -> dict:
    """ONE launch of lightning_predict_script.py (Lightning DDP on 2 CPU processes) for its three runs over a shared
    validation/prediction loader, read by three test modules in two folders (once per run: ``once_per_run``):
    {"records": [rank 0's, rank 1's], "stderr": ..., "before_stages": the stderr before the stages run (which says
    "reads all" on purpose)}."""
    def launch(out: Path) -> dict:
        done = subprocess.run([sys.executable, str(HERE / "lightning_predict_script.py"), str(forty_one),
                               str(forty_one_documents), str(out)], capture_output=True, text=True, timeout=480,
                              cwd=out, env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"})
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stderr.count("RUN stages") == 2, done.stderr[-3000:]  # each rank started the last run
        return {"records": [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)],
                "stderr": done.stderr, "before_stages": done.stderr[:done.stderr.rindex("RUN stages")]}
    return once_per_run(tmp_path_factory, worker_id, "lightning_predict", launch)
