"""Box and mask targets against hostile folders: a sample with too many objects is named, never padded or
rasterised into unbounded memory; masks are decoded a few at a time."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from dataio import ImageLoader, ShardDataset
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.augment.bbox_crop import BBoxCropConfig
from dataio.formats.errors import ConfigError, SampleError
from dataio.detection.detection_config import DetectionConfig
from tests.detection.test_detection_loader import rewrite_column

ROOT = Path(__file__).resolve().parents[2]


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


def damaged_mask_offsets(coco_shards: Path, folder: Path) -> Path:
    """A copy of ``coco_shards`` whose masks column has an RLE offset 1e12 past its bytes (the Arrow file
    itself stays readable: the IPC reader checks buffer sizes, not offsets)."""
    shutil.copytree(coco_shards, folder)
    table = read_sample_table(folder / "samples.arrow", declared=read_manifest(folder)[1].table_columns()).table
    masks = table.column("masks").combine_chunks()
    offsets = np.frombuffer(masks.values.buffers()[1], np.int64)[:len(masks.values) + 1].copy()
    offsets[2] = 10**12
    rles = pa.Array.from_buffers(pa.large_binary(), len(masks.values),
                                 [None, pa.py_buffer(offsets.tobytes()), masks.values.buffers()[2]])
    columns = {n: table.column(n).combine_chunks() for n in table.schema.names}
    columns["masks"] = pa.ListArray.from_arrays(masks.offsets, rles)
    schema = pa.schema([pa.field(n, a.type) for n, a in columns.items()])
    with pa.ipc.new_file(folder / "samples.arrow", schema) as writer:
        writer.write_table(pa.Table.from_arrays(list(columns.values()), schema=schema))
    return folder


def test_a_target_column_with_offsets_past_its_values_is_named_not_a_crash(coco_shards, tmp_path) -> None:
    folder = damaged_mask_offsets(coco_shards, tmp_path / "shards")
    reason = "sample table column 'masks' is damaged (List child array invalid"
    done = subprocess.run([sys.executable, "-m", "dataio", "verify", str(folder), "--deep"], capture_output=True,
                          text=True, cwd=ROOT)
    assert done.returncode == 1 and reason in done.stdout + done.stderr, (done.returncode, done.stderr[-500:])
    opened = subprocess.run([sys.executable, "-c", "import sys\nfrom dataio import ImageLoader\n"
                             "from dataio.detection.detection_config import DetectionConfig\n"
                             "try:\n    loader = ImageLoader(sys.argv[1], batch_size=4, image_size=32, train=False, "
                             "targets=DetectionConfig(masks=True))\n    list(loader)\n"
                             "except ValueError as e:\n    print(e)\n    sys.exit(1)", str(folder)],
                            capture_output=True, text=True, cwd=ROOT)
    assert opened.returncode == 1 and reason in opened.stdout and str(folder) in opened.stdout, \
        (opened.returncode, opened.stderr[-500:])


@pytest.mark.parametrize("make, settings, parameter", [
    (DetectionConfig, {"masks": "no"}, "masks"), (DetectionConfig, {"crowd": None}, "crowd"),
    (DetectionConfig, {"min_visible": True}, "min_visible"), (DetectionConfig, {"min_side": False}, "min_side"),
    (BBoxCropConfig, {"thresholds": 0.5}, "thresholds"), (BBoxCropConfig, {"thresholds": ("0.5",)}, "thresholds"),
    (BBoxCropConfig, {"scaling": (0.3,)}, "scaling"), (BBoxCropConfig, {"aspect_ratio": (0.5, float("inf"))},
                                                        "aspect_ratio"),
    (BBoxCropConfig, {"num_attempts": "5"}, "num_attempts"), (BBoxCropConfig, {"num_attempts": 2.5}, "num_attempts"),
    (BBoxCropConfig, {"total_num_attempts": 10**9}, "total_num_attempts"),
    (BBoxCropConfig, {"allow_no_crop": "no"}, "allow_no_crop")])
def test_target_settings_of_the_wrong_type_are_refused_naming_them(make, settings, parameter) -> None:
    with pytest.raises(ConfigError) as caught:
        make(**settings)
    assert caught.value.parameters == (parameter,) and parameter in str(caught.value)


def test_a_sample_past_max_boxes_is_named(coco_shards) -> None:
    options = dict(batch_size=4, image_size=32, train=False, shuffle=False, targets=DetectionConfig(max_boxes=2))
    with ImageLoader(coco_shards, **options) as loader, pytest.raises(SampleError) as raised:
        list(loader)
    assert raised.value.key == "000000000"  # the first sample of the first batch (every one holds 4 boxes)
    assert "4 boxes after its crop and filters, more than max_boxes=2" in raised.value.reason
    assert raised.value.shard.startswith("shard-")


def test_an_empty_image_id_is_named_by_the_loader_and_verify(coco_shards, tmp_path) -> None:
    folder = tmp_path / "shards"
    shutil.copytree(coco_shards, folder)
    rewrite_column(folder, "image_id", lambda values: values.__setitem__(1, None))
    reason = "sample table column 'image_id' has empty (null) values"
    with pytest.raises(ValueError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        with ImageLoader(folder, batch_size=4, image_size=32, train=False) as loader:
            list(loader)
    done = subprocess.run([sys.executable, "-m", "dataio", "verify", str(folder)], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 1 and reason in done.stdout + done.stderr, done.stdout[-500:]


def test_a_table_size_past_the_pixel_limit_is_named_not_allocated(coco_shards, tmp_path) -> None:
    folder = tmp_path / "shards"
    shutil.copytree(coco_shards, folder)
    for name in ("width", "height"):  # 90,250,000 pixels: each empty mask was a 90 MB array of zeros
        rewrite_column(folder, name, lambda values: values.__setitem__(1, 9500))
    rewrite_column(folder, "masks", lambda values: values.__setitem__(1, [b""] * len(values[1])))
    options = dict(batch_size=4, image_size=32, train=False, shuffle=False, targets=DetectionConfig(masks=True))
    with ImageLoader(folder, **options) as loader, pytest.raises(SampleError) as raised:
        list(loader)
    assert "its size 9500x9500 is not one the readers decode (at most 89,478,485 pixels)" in raised.value.reason
    with ImageLoader(folder, on_error="skip", **options) as loader:
        assert sum(len(b["sample_ids"]) for b in loader) == 11 and len(loader.stats.errors) == 1
