"""What the detection source checks of each sample in its read tasks, so the error policy can drop the sample:
its image's size against the table's (a stale table would put every box in the wrong place), and its box count
against ``max_boxes`` (the device stage cannot drop a sample)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dataio import ImageLoader, ShardDataset
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.augment.box_targets import BoxTargets
from dataio.formats.errors import SampleError
from dataio.detection.detection_config import DetectionConfig
from dataio.detection.max_boxes import over_max_boxes
from tests.detection.test_detection_hostile import crowded
from tests.detection.test_detection_loader import rewrite_column

ROOT = Path(__file__).resolve().parents[2]


def doubled_size(coco_shards: Path, folder: Path) -> tuple[str, str]:
    """A copy of ``coco_shards`` whose table gives sample 1 twice its size; (the table's size, the image's)."""
    shutil.copytree(coco_shards, folder)
    table = read_sample_table(folder / "samples.arrow", declared=read_manifest(folder)[1].table_columns())
    width, height = int(table.width[1]), int(table.height[1])
    for name in ("width", "height"):
        rewrite_column(folder, name, lambda values: values.__setitem__(1, 2 * values[1]))
    return f"{2 * width}x{2 * height}", f"{width}x{height}"


@pytest.mark.parametrize("decoder, masks", [("turbo", False), ("turbo", True), ("dali", False)])
def test_an_image_whose_size_is_not_the_tables_is_its_samples_error(coco_shards, tmp_path, decoder, masks) -> None:
    folder = tmp_path / "shards"
    table_size, image_size = doubled_size(coco_shards, folder)
    options = dict(batch_size=4, image_size=32, train=False, shuffle=False, decoder=decoder,
                   targets=DetectionConfig(masks=masks))
    with ImageLoader(folder, **options) as loader, pytest.raises(SampleError) as raised:
        list(loader)
    assert raised.value.key == "000000001" and raised.value.shard.startswith("shard-")
    assert f"gives its size as {table_size}, the image is {image_size}" in raised.value.reason
    with ImageLoader(coco_shards, **options) as loader:
        whole = list(loader)
    assert len(loader.stats.errors) == 0
    with ImageLoader(folder, on_error="skip", **options) as skipping:
        batches = list(skipping)
    assert len(skipping.stats.errors) == 1  # with masks, the image and its masks both fail it: counted once
    assert image_size in skipping.stats.errors[0]["reason"]
    ids = [int(i) for b in batches for i in b["sample_ids"]]
    assert ids == [i for i in range(12) if i != 1]
    kept = {int(i): b["boxes"][j][b["valid"][j]] for b in batches for j, i in enumerate(b["sample_ids"])}
    before = {int(i): b["boxes"][j][b["valid"][j]] for b in whole for j, i in enumerate(b["sample_ids"])}
    assert all(kept[i].tolist() == before[i].tolist() for i in ids)  # the others' targets untouched
    assert sum(int(b["num_boxes"].sum()) for b in batches) == sum(len(v) for v in kept.values())
    if masks:
        assert sum(len(b["masks"]) for b in batches) == sum(len(v) for v in kept.values())


def test_verify_deep_names_a_table_size_that_is_not_the_images(coco_shards, tmp_path) -> None:
    folder = tmp_path / "shards"
    table_size, image_size = doubled_size(coco_shards, folder)
    # its masks emptied: the masks' RLE check (the only one before) has nothing to find
    rewrite_column(folder, "masks", lambda values: values.__setitem__(1, [b""] * len(values[1])))
    done = subprocess.run([sys.executable, "-m", "dataio", "verify", str(folder), "--deep"], capture_output=True,
                          text=True, cwd=ROOT)
    line = "sample '000000001' in shard shard-"
    assert done.returncode == 1, (done.returncode, done.stdout[-500:], done.stderr[-500:])
    assert any(line in row and f"gives its size as {table_size}, the image is {image_size}" in row
               for row in (done.stdout + done.stderr).splitlines()), done.stderr[-800:]


def test_a_sample_past_max_boxes_is_dropped_under_skip(coco_shards, tmp_path) -> None:
    folder = crowded(coco_shards, tmp_path / "shards", 8)
    options = dict(batch_size=4, image_size=32, train=False, shuffle=False, targets=DetectionConfig(max_boxes=5))
    with ImageLoader(folder, **options) as loader, pytest.raises(SampleError) as raised:
        list(loader)
    assert raised.value.key == "000000001"
    assert "8 boxes after its crop and filters, more than max_boxes=5" in raised.value.reason
    with ImageLoader(folder, on_error="skip", **options) as loader:
        batches = list(loader)
    assert len(loader.stats.errors) == 1 and "max_boxes=5" in loader.stats.errors[0]["reason"]
    assert [int(i) for b in batches for i in b["sample_ids"]] == [i for i in range(12) if i != 1]
    assert all(b["boxes"].shape[1] == 5 and int(b["num_boxes"].max()) <= 5 for b in batches)


def test_max_boxes_counts_a_bound_of_the_device_stages_count_under_randaugment() -> None:
    # a box 0.5 px high: dropped by min_side=1 without warps; a rotation could widen its envelope, so with
    # RandAugment after the copy it counts (only min_visible applies, which the warps never raise)
    thin = BoxTargets.from_ragged(np.array([[10, 10, 20, 10.5], [30, 30, 40, 40]], np.float32), np.zeros(2, np.int64),
                                  np.array([2]), np.array([64.0]), np.array([64.0]))
    detection = DetectionConfig(max_boxes=1, min_side=1.0)
    crowd = np.zeros(2, bool)
    error = lambda sample, reason: SampleError("shard", str(sample), reason)  # noqa: E731
    assert over_max_boxes(thin, crowd, detection, np.array([7]), error) == []
    [(position, failed)] = over_max_boxes(thin, crowd, detection, np.array([7]), error, warped=True)
    assert position == 0 and failed.key == "7" and "2 boxes" in failed.reason


@pytest.mark.parametrize("image_size", [None, 32])
def test_shard_dataset_names_an_image_whose_size_is_not_the_tables(coco_shards, tmp_path, image_size) -> None:
    folder = tmp_path / "shards"
    table_size, image_size_seen = doubled_size(coco_shards, folder)
    dataset = ShardDataset(folder, image_size=image_size, targets=DetectionConfig())
    with pytest.raises(SampleError, match=f"gives its size as {table_size}, the image is {image_size_seen}"):
        dataset[1]
    assert len(dataset[2]["boxes"]) == 4
