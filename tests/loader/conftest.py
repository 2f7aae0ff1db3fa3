"""Fixtures shared by the loader tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from tests.conftest import NUM_COLOURED


@pytest.fixture(scope="session")
def one_photo_fewer(coloured_folder, tmp_path_factory) -> Path:
    """The coloured shards' stale copy: the same photos but the last (another node's copy, one photo short)."""
    root = tmp_path_factory.mktemp("stale")
    shutil.copytree(coloured_folder, root / "src")
    (root / "src" / f"c{(NUM_COLOURED - 1) % 3}" / f"img{NUM_COLOURED - 1:03d}.jpg").unlink()
    convert_images(ConvertImagesConfig(src=root / "src", out=root / "out", max_shard_samples=7, num_workers=1,
                                       progress=False))
    return root / "out"


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
