"""COCO targets (issue 42): an annotation id given twice (two annotation files merged, each numbering its
annotations from 1) is packed without a word. pycocotools (``COCO.createIndex``: ``anns[ann['id']] = ann``) and
every evaluator built on it keep one of the two, so the packed folder and the file's own evaluation disagree on
the boxes; issue 42 names the same merge for image ids. Should: a line naming the annotation id (rejected, like
a duplicated image id, or at least told), ``--strict`` exit 1. Controls: a category id missing from
``categories``, a polygon with NaN and an RLE of the wrong size are one rejected line each (hold now)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from dataio.formats.coco.synthetic_coco import SyntheticCocoConfig, write_coco_folder
from tests.hostile_helpers import run_cli


@pytest.fixture
def coco(tmp_path) -> tuple[Path, dict]:
    images, annotations = write_coco_folder(tmp_path / "coco", SyntheticCocoConfig(images=4, empty=0, seed=36))
    return images, json.loads(Path(annotations).read_text())


def convert(tmp_path: Path, images: Path, data: dict, *flags: str):
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return run_cli("convert", "coco", str(images), str(path), "out", "--no-progress", *flags, cwd=tmp_path)


def test_an_annotation_id_given_twice_is_named(coco, tmp_path):
    images, data = coco
    data["annotations"][1]["id"] = data["annotations"][0]["id"]
    done = convert(tmp_path, images, data)
    said = done.stdout + done.stderr + ((tmp_path / "out" / "rejected.jsonl").read_text()
                                        if (tmp_path / "out" / "rejected.jsonl").exists() else "")
    assert f"annotation id {data['annotations'][0]['id']}" in said or "annotation id" in said, said
    strict = run_cli("convert", "coco", str(images), str(tmp_path / "edited.json"), "out2", "--no-progress",
                     "--strict", cwd=tmp_path)
    assert strict.returncode == 1, strict.stdout + strict.stderr


@pytest.mark.parametrize("edit, reason", [
    (lambda a, img: a.update(category_id=999), "category_id 999 is not a category"),
    (lambda a, img: a.update(segmentation=[[float("nan")] * 8]), "not a list of finite numbers"),
    (lambda a, img: a.update(segmentation={"size": [10, 10], "counts": [100]}), "RLE size [10, 10]"),
], ids=["missing-category", "nan-polygon", "rle-wrong-size"])
def test_control_bad_targets_are_one_rejected_line_each(coco, tmp_path, edit, reason):
    images, data = coco
    data = copy.deepcopy(data)
    edit(data["annotations"][0], data["images"][0])
    done = convert(tmp_path, images, data)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    lines = [json.loads(line) for line in (tmp_path / "out" / "rejected.jsonl").read_text().splitlines()]
    assert len(lines) == 1 and reason in lines[0]["reason"], lines
