"""Tiny generated image-text pairs as img2dataset writes them, adopted by ``dataio index`` (no network: the
tokenizer is trained on the spot)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dataio.formats.pairs.synthetic_pair_writers import write_img2dataset
from dataio.formats.pairs.synthetic_pairs import SyntheticPairsConfig
from dataio.formats.images.wds_index import IndexConfig, index_shards
from dataio.formats.text.tokenizer_setup import TokenizerConfig

PAIRS = SyntheticPairsConfig(count=44, samples_per_shard=10, failed_fraction=0.1, seed=7)


def indexed(folder: Path, tokenizer: TokenizerConfig | None) -> Path:
    index_shards(IndexConfig(shards=(folder,), tokenizer=tokenizer, num_workers=2, progress=False))
    return folder


@pytest.fixture(scope="session")
def pair_tars(tmp_path_factory) -> Path:
    """40 img2dataset pairs (4 failed downloads) in 5 tars, indexed with a BPE tokenizer trained on the captions."""
    folder = tmp_path_factory.mktemp("pairs") / "tars"
    write_img2dataset(folder, PAIRS)
    return indexed(folder, TokenizerConfig(train="bpe", vocab_size=320))


@pytest.fixture(scope="session")
def pair_tars_text(pair_tars, tmp_path_factory) -> Path:
    """The same tars indexed without a tokenizer: captions only."""
    folder = tmp_path_factory.mktemp("pairs_text") / "tars"
    folder.mkdir()
    for tar in sorted(pair_tars.glob("*.tar")):
        shutil.copy(tar, folder / tar.name)
    return indexed(folder, None)


REAL_PAIRS = SyntheticPairsConfig(count=20, photo_class="imagenet", samples_per_shard=8, seed=5)


@pytest.fixture(scope="session")
def real_pair_tars(tmp_path_factory) -> Path:
    """img2dataset output of 20 photos of real size (ImageNet-typical: 333-500 pixels a side, ~110 KB) in 3 tars, not
    indexed: copy it before ``dataio index`` adopts it in place."""
    folder = tmp_path_factory.mktemp("real_pairs") / "tars"
    write_img2dataset(folder, REAL_PAIRS)
    return folder
