"""Targets that cannot be right are refused when ``dataio convert coco`` packs them, each with its line (issue 42):
an image id given to two images (two annotation files merged, both numbering from 1), boxes of no area once clipped
to the image or thinner than a pixel; ``dataio verify`` names such boxes in folders packed before."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from PIL import Image

from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table, write_sample_table

ROOT = Path(__file__).resolve().parents[2]


def dataio(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dataio", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def photos(folder: Path, names: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(names):
        Image.new("RGB", (64, 48), (40 * i, 90, 90)).save(folder / name)


def box(ann_id: int, image_id: int, bbox: list[float]) -> dict:
    return {"id": ann_id, "image_id": image_id, "category_id": 1, "bbox": bbox, "iscrowd": 0}


def packed(out: Path) -> tuple[list[int], list[list[float]]]:
    """The packed samples' COCO ids and their boxes (flat, 4 a box)."""
    folder, manifest = read_manifest(out)
    table = read_sample_table(folder / manifest.sample_table, declared=manifest.table_columns()).table
    return table.column("image_id").to_pylist(), table.column("boxes").to_pylist()


def test_an_image_id_of_two_merged_annotation_files_refuses_both_images_and_every_annotation_naming_it(tmp_path):
    """Two annotation files (train and extra) both number their images from 1; merged as a script merges them (the
    lists concatenated). Before, the second image 2 was 'given twice (the first is kept)' and its boxes were put on
    the first image 2's photo."""
    photos(tmp_path / "images", ["a1.jpg", "a2.jpg", "b2.jpg", "b3.jpg"])
    first = {"images": [{"id": 1, "file_name": "a1.jpg", "width": 64, "height": 48},
                        {"id": 2, "file_name": "a2.jpg", "width": 64, "height": 48}],
             "annotations": [box(10, 1, [1, 1, 10, 10]), box(11, 2, [2, 2, 10, 10])],
             "categories": [{"id": 1, "name": "thing"}]}
    second = {"images": [{"id": 2, "file_name": "b2.jpg", "width": 64, "height": 48},
                         {"id": 3, "file_name": "b3.jpg", "width": 64, "height": 48}],
              "annotations": [box(20, 2, [30, 20, 20, 20]), box(21, 3, [5, 5, 5, 5])],
              "categories": [{"id": 1, "name": "thing"}]}
    merged = {"images": first["images"] + second["images"],
              "annotations": first["annotations"] + second["annotations"], "categories": first["categories"]}
    (tmp_path / "merged.json").write_text(json.dumps(merged))
    done = dataio("convert", "coco", str(tmp_path / "images"), str(tmp_path / "merged.json"), str(tmp_path / "out"),
                  "--workers", "1", "--no-progress")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 4, lines
    for name in ("a2.jpg", "b2.jpg"):
        assert any(f"rejected merged.json#image 2: its id is given to 2 images (file_name '{name}'): none of them is "
                   "packed" in line for line in lines), lines
    for ann_id in (11, 20):
        assert any(f"merged.json#annotation {ann_id}: image_id 2 is given to 2 images" in line for line in lines)
    ids, boxes = packed(tmp_path / "out")
    assert ids == [1, 3] and [len(b) // 4 for b in boxes] == [1, 1]  # each photo with its own box only
    strict = dataio("convert", "coco", str(tmp_path / "images"), str(tmp_path / "merged.json"),
                    str(tmp_path / "strict"), "--workers", "1", "--no-progress", "--strict")
    assert strict.returncode == 1


def test_boxes_of_no_area_once_clipped_or_thinner_than_a_pixel_are_refused_with_a_line(tmp_path):
    """Before, they were packed, passed verify, and the loader dropped them (``min_side``) without a word."""
    photos(tmp_path / "images", ["a.jpg"])
    annotations = [box(1, 1, [10, 10, 1e-7, 8]),  # 1e-7 px wide
                   box(2, 1, [64.5, 10, 0.4, 8]),  # past the right edge by less than the slack: nothing once clipped
                   box(3, 1, [10, 10, 8, 0.5]),  # half a pixel high
                   box(4, 1, [10, 10, 8, 8])]  # the good one
    document = {"images": [{"id": 1, "file_name": "a.jpg", "width": 64, "height": 48}], "annotations": annotations,
                "categories": [{"id": 1, "name": "thing"}]}
    (tmp_path / "instances.json").write_text(json.dumps(document))
    done = dataio("convert", "coco", str(tmp_path / "images"), str(tmp_path / "instances.json"),
                  str(tmp_path / "out"), "--workers", "1", "--no-progress")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith("rejected instances.json#annotation 1: bbox [10, 10, 1e-07, 8] is 1e-07 x 8 px once "
                               "clipped to the 64x48 image, under the 1 px a box must span each way"), lines[0]
    assert "annotation 2: bbox [64.5, 10, 0.4, 8] is 0 x 8 px once clipped" in lines[1], lines[1]
    assert "annotation 3: bbox [10, 10, 8, 0.5] is 8 x 0.5 px" in lines[2], lines[2]
    rejected = (tmp_path / "out" / "rejected.jsonl").read_text().splitlines()
    assert len(rejected) == 3
    assert packed(tmp_path / "out")[1] == [[10.0, 10.0, 18.0, 18.0]]
    assert dataio("verify", str(tmp_path / "out")).returncode == 0


def test_verify_names_boxes_of_no_area_in_a_folder_packed_before(tmp_path):
    """A folder packed before packing refused them (its table written so): verify exits 1 naming the row."""
    photos(tmp_path / "images", ["a.jpg", "b.jpg"])
    document = {"images": [{"id": 1, "file_name": "a.jpg", "width": 64, "height": 48},
                           {"id": 2, "file_name": "b.jpg", "width": 64, "height": 48}],
                "annotations": [box(1, 1, [10, 10, 8, 8]), box(2, 2, [20, 20, 8, 8])],
                "categories": [{"id": 1, "name": "thing"}]}
    (tmp_path / "instances.json").write_text(json.dumps(document))
    out = tmp_path / "out"
    assert dataio("convert", "coco", str(tmp_path / "images"), str(tmp_path / "instances.json"), str(out),
                  "--workers", "1", "--no-progress").returncode == 0
    folder, manifest = read_manifest(out)
    table = read_sample_table(folder / manifest.sample_table, declared=manifest.table_columns()).table
    boxes = table.column("boxes").to_pylist()
    boxes[1] = [20.0, 20.0, 20.0, 28.0]  # no width, as the old packer stored a box clipped to nothing
    columns = {name: table.column(name) for name in table.schema.names}
    columns["boxes"] = pa.array(boxes, table.schema.field("boxes").type)
    write_sample_table(out / "samples.arrow", columns)
    done = dataio("verify", str(out))
    assert done.returncode == 1 and "Traceback" not in done.stderr, (done.stdout, done.stderr)
    key = table.column("key").to_pylist()[1]
    shown = done.stdout + done.stderr
    assert key in shown and "box [20.0, 20.0, 20.0, 28.0] is 0 x 8 px: no area" in shown, shown
