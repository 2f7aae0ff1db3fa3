"""``dataio convert coco`` against hostile annotation files: what pycocotools would crash on or be swamped by is
rejected per annotation, with its reason, before it gets there."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("pycocotools.mask")


def _small_address_space() -> None:
    """2 GiB of address space: a converter that asks pycocotools for gigabytes fails fast instead of swapping."""
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def convert(tmp_path: Path, annotations: list[dict], *, width: int = 64, height: int = 48,
            images: list[dict] | None = None) -> subprocess.CompletedProcess:
    """One grey photo and ``annotations`` on it, converted by the CLI in a bounded process."""
    folder = tmp_path / "images"
    folder.mkdir(exist_ok=True)
    Image.new("RGB", (width, height), (90, 90, 90)).save(folder / "a.jpg")
    document = {"images": images or [{"id": 1, "file_name": "a.jpg", "width": width, "height": height}],
                "annotations": annotations, "categories": [{"id": 1, "name": "thing"}]}
    (tmp_path / "instances.json").write_text(json.dumps(document))
    return subprocess.run([sys.executable, "-m", "dataio", "convert", "coco", str(folder),
                           str(tmp_path / "instances.json"), str(tmp_path / "out"), "--workers", "1", "--no-progress"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, preexec_fn=_small_address_space)


def annotation(ann_id: int, segmentation: list[list[float]]) -> dict:
    return {"id": ann_id, "image_id": 1, "category_id": 1, "bbox": [1, 1, 10, 10], "iscrowd": 0,
            "segmentation": segmentation}


def test_polygons_that_would_swamp_the_rasteriser_are_rejected_with_their_reason(tmp_path) -> None:
    zigzag = [float(v) for i in range(200_000) for v in ((0, i % 48) if i % 2 else (63, i % 48))]
    done = convert(tmp_path, [annotation(1, [[0, 0, 4e8, 0, 0, 4e8]]), annotation(2, [zigzag]),
                              annotation(3, [[-1e12, -1e12, -1e12 + 5, -1e12, -1e12, -1e12 + 5]]),
                              annotation(4, [[1, 1, 20, 1, 20, 20, 1, 20]])])
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 3, done.stderr
    assert "annotation 1: polygon 0 has a point far outside the 64x48 image" in done.stderr
    assert "annotation 2: its polygons' outline is 12,600,000 pixels long (more than 1,000,000)" in done.stderr
    assert "annotation 3: polygon 0 has a point far outside" in done.stderr
    assert "packed 1 images with 1 boxes (1 masks)" in done.stdout  # the good one kept


def test_an_image_with_more_annotations_than_a_sample_may_hold_is_rejected_whole(tmp_path) -> None:
    images = [{"id": 1, "file_name": "a.jpg", "width": 64, "height": 48},
              {"id": 2, "file_name": "b.jpg", "width": 64, "height": 48}]
    (tmp_path / "images").mkdir()
    Image.new("RGB", (64, 48)).save(tmp_path / "images" / "b.jpg")
    crowd = [{"id": 10 + i, "image_id": 1, "category_id": 1, "bbox": [1, 1, 5, 5]} for i in range(10_001)]
    done = convert(tmp_path, crowd + [{"id": 5, "image_id": 2, "category_id": 1, "bbox": [1, 1, 5, 5]}],
                   images=images)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["rejected instances.json#image 1: 10,001 good annotations, more than the "
                                        "10,000 a sample may hold"]
    assert "packed 1 images with 1 boxes" in done.stdout


def test_an_image_id_past_64_bits_is_rejected_not_a_traceback_at_the_end(tmp_path) -> None:
    (tmp_path / "images").mkdir()
    Image.new("RGB", (64, 48)).save(tmp_path / "images" / "b.jpg")
    images = [{"id": 1 << 63, "file_name": "a.jpg", "width": 64, "height": 48},
              {"id": 2, "file_name": "b.jpg", "width": 64, "height": 48}]
    done = convert(tmp_path, [{"id": 5, "image_id": 2, "category_id": 1, "bbox": [1, 1, 5, 5]}], images=images)
    assert done.returncode == 0, done.stderr[-1000:]
    assert done.stderr.splitlines() == ["rejected instances.json#images[0]: its id 9223372036854775808 does not fit "
                                        "in 64 bits"]
    assert "packed 1 images with 1 boxes" in done.stdout and (tmp_path / "out" / "manifest.json").is_file()


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_annotations_that_are_not_a_file_are_refused_without_blocking(tmp_path, kind) -> None:
    (tmp_path / "images").mkdir()
    annotations = tmp_path / "instances.json"
    if kind == "fifo":
        os.mkfifo(annotations)  # no writer: opening it for reading blocked for ever
    else:
        annotations = Path("/dev/zero")  # endless: 2 GiB were read before the size limit refused it
    done = subprocess.run([sys.executable, "-m", "dataio", "convert", "coco", str(tmp_path / "images"),
                           str(annotations), str(tmp_path / "out"), "--no-progress"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    expected = "FIFO" if kind == "fifo" else "character device"
    assert done.returncode == 1 and done.stderr == f"dataio convert: {annotations}: not a regular file: {expected} " \
                                                   "(the annotations must be a file)\n", done.stderr
    assert not (tmp_path / "out").exists()


def test_category_names_past_a_classes_file_stop_the_conversion(tmp_path) -> None:
    from dataio.formats.coco.coco_json import read_coco_json
    from dataio.formats.errors import DataioError

    # the manifest holds the names twice: 140 MB of names made a 294 MB manifest, past the 256 MB any reader
    # opens, after a conversion that said it succeeded; past 64 MB (a classes file's limit) is refused now
    document = {"images": [], "categories": [{"id": 1, "name": "x" * (65 << 20)}]}
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(document))
    with pytest.raises(DataioError, match=r"the categories' names take 68,157,444 bytes, more than the 67,108,864"):
        read_coco_json(path)
