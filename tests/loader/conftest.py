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
