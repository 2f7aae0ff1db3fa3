"""Box and mask targets against hostile folders: a sample with too many objects is named, never padded or
rasterised into unbounded memory; masks are decoded a few at a time."""

from __future__ import annotations

import shutil
import tracemalloc
from pathlib import Path

import pytest

from dataio import ImageLoader, ShardDataset
from dataio.formats.errors import SampleError
from dataio.images.detection_config import DetectionConfig
from tests.images.test_detection_loader import rewrite_column


def crowded(coco_shards: Path, folder: Path, objects: int, sample: int = 1) -> Path:
    """A copy of ``coco_shards`` whose ``sample`` holds ``objects`` copies of its first object (box, label,
    crowd flag and mask)."""
    shutil.copytree(coco_shards, folder)
    for name, width in (("boxes", 4), ("labels", 1), ("iscrowd", 1), ("masks", 1)):
        rewrite_column(folder, name, lambda values: values.__setitem__(sample, values[sample][:width] * objects))
    return folder


def test_a_sample_with_more_objects_than_the_cap_is_named_not_padded(coco_shards, tmp_path) -> None:
    folder = crowded(coco_shards, tmp_path / "shards", 10_001)
    options = dict(batch_size=4, image_size=32, train=False, shuffle=False, targets=DetectionConfig(masks=True))
    with ImageLoader(folder, **options) as loader, pytest.raises(SampleError) as raised:
        list(loader)
    assert "10,001 boxes, more than the 10,000 a sample may hold" in raised.value.reason
    with ImageLoader(folder, on_error="skip", **options) as loader:
        batches = list(loader)
    assert len(loader.stats.errors) == 1 and max(int(b["num_boxes"].max()) for b in batches) < 10
    with pytest.raises(SampleError, match="10,001 boxes"):
        ShardDataset(folder, image_size=32, targets=DetectionConfig(masks=True))[1]


def test_many_masks_are_decoded_a_few_at_a_time(coco_shards, tmp_path) -> None:
    folder = crowded(coco_shards, tmp_path / "shards", 3_000)
    dataset = ShardDataset(folder, image_size=16, targets=DetectionConfig(masks=True, min_visible=0.0))
    tracemalloc.start()
    try:
        sample = dataset[1]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sample["masks"].shape == (3_000, 16, 16)
    # 3,000 masks at 16x16: 0.8 MB; all of them at the photo's 640x480 (or 480x640) first: 920 MB
    assert peak < 100 << 20, f"{peak / 2**20:.0f} MB"
