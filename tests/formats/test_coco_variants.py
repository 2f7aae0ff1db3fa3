"""COCO-shaped files and folders that are not what a command packs: LVIS (packed, its images found by coco_url),
panoptic JSON (refused, not 0 boxes with exit 0), YOLO and VOC folders given to ``convert images`` (refused, not
packed as classes named after their subfolders)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from dataio import ShardDataset
from dataio.formats.coco.coco_convert import ConvertCocoConfig, convert_coco
from dataio.formats.dataset.manifest import read_manifest
from tests.formats.detection_layouts import coloured_images, write_voc, write_yolo

ROOT = Path(__file__).resolve().parents[2]


def dataio(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dataio", *map(str, args), "--workers", "1", "--no-progress"],
                          capture_output=True, text=True, cwd=ROOT)


def test_an_lvis_json_finds_its_images_by_coco_url_in_cocos_folders(coloured_folder, tmp_path) -> None:
    images, annotations = [], []
    for i, source in enumerate(coloured_images(coloured_folder, 3)):
        split = ("train2017", "val2017")[i % 2]  # LVIS val draws from both of COCO's folders
        (tmp_path / "coco" / split).mkdir(parents=True, exist_ok=True)
        shutil.copy(source, tmp_path / "coco" / split / f"{i:012d}.jpg")
        width, height = Image.open(source).size
        images.append({"id": 100 + i, "width": width, "height": height, "neg_category_ids": [2],
                       "not_exhaustive_category_ids": [], "coco_url": f"http://images.cocodataset.org/{split}/"
                                                                      f"{i:012d}.jpg"})
        annotations.append({"id": i + 1, "image_id": 100 + i, "category_id": 1 + i % 2, "bbox": [10, 20, 30, 40],
                            "area": 1200, "segmentation": []})
    categories = [{"id": 1, "name": "aerosol_can", "synset": "aerosol.n.02", "frequency": "c"},
                  {"id": 2, "name": "air_conditioner", "synset": "air_conditioner.n.01", "frequency": "f"}]
    (tmp_path / "lvis_v1_val.json").write_text(json.dumps({"images": images, "annotations": annotations,
                                                           "categories": categories}))
    summary = convert_coco(ConvertCocoConfig(images=tmp_path / "coco", annotations=tmp_path / "lvis_v1_val.json",
                                             out=tmp_path / "out", num_workers=1, progress=False))
    assert summary.num_samples == 3 and summary.num_boxes == 3 and summary.rejected == ()
    assert read_manifest(tmp_path / "out")[1].classes == ("aerosol_can", "air_conditioner")
    dataset = ShardDataset(tmp_path / "out")
    assert sorted(dataset[i]["image_id"] for i in range(3)) == [100, 101, 102]
    assert all(np.allclose(dataset[i]["boxes"].numpy(), [[10, 20, 40, 60]]) for i in range(3))


def test_a_panoptic_json_is_refused_in_one_line(coloured_folder, tmp_path) -> None:
    source = coloured_images(coloured_folder, 1)[0]
    (tmp_path / "val2017").mkdir()
    shutil.copy(source, tmp_path / "val2017" / "a.jpg")
    width, height = Image.open(source).size
    panoptic = {"images": [{"id": 1, "file_name": "a.jpg", "width": width, "height": height}],
                "annotations": [{"image_id": 1, "file_name": "a.png", "segments_info": [
                    {"id": 3226956, "category_id": 1, "iscrowd": 0, "bbox": [1, 2, 30, 40], "area": 900}]}],
                "categories": [{"id": 1, "name": "person", "supercategory": "person", "isthing": 1}]}
    (tmp_path / "panoptic_val2017.json").write_text(json.dumps(panoptic))
    result = dataio("convert", "coco", tmp_path / "val2017", tmp_path / "panoptic_val2017.json", tmp_path / "out")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        f"dataio convert: {tmp_path / 'panoptic_val2017.json'}: a COCO panoptic segmentation JSON (1 annotations "
        "hold segments_info and no bbox), which dataio does not pack: give the instances JSON of the same images "
        "(instances_*.json) to dataio convert coco"]
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_convert_images_refuses_yolo_and_voc_folders_naming_the_command(coloured_folder, tmp_path) -> None:
    write_yolo(tmp_path / "yolo", coloured_folder, count=2)
    write_voc(tmp_path / "voc", coloured_folder, count=2)
    for layout, what, command in (("yolo", "a YOLO detection folder (images/ and labels/)", "dataio convert yolo"),
                                  ("voc", "a Pascal VOC folder (JPEGImages/ and Annotations/)", "dataio convert voc")):
        result = dataio("convert", "images", tmp_path / layout, tmp_path / f"{layout}-out")
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.splitlines()) == 1 and what in result.stderr and command in result.stderr
        assert not (tmp_path / f"{layout}-out" / "manifest.json").exists()


def test_the_other_detection_formats_block_of_the_docs_runs(tmp_path) -> None:
    page = (ROOT / "docs" / "detection.md").read_text()
    section = page.split("## Other detection formats", 1)[1].split("\n## ", 1)[0]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    result = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[[120.0, 60.0, 200.0, 180.0]] [1]"
