"""``dataio convert coco`` over a person_keypoints JSON: the keypoints packed as the JSON gives them (they were
dropped without a word), names and skeleton in the manifest, a bad keypoints list rejected per annotation in one
line, keypoints without names refused in one line, and a plain instances folder unchanged (no keypoints field)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from dataio import ShardDataset
from dataio.formats.coco.coco_fields import read_target_arrays
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from tests.keypoint_fixtures import NAMES, SKELETON, keypoint_document

ROOT = Path(__file__).resolve().parents[2]


def dataio(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dataio", *args], capture_output=True, text=True, cwd=ROOT)


def stored(out: Path):
    _, manifest = read_manifest(out)
    table = read_sample_table(out / manifest.sample_table, declared=manifest.table_columns())
    return manifest, read_target_arrays(table.table, False, len(manifest.options.get("keypoints", [])))


def test_keypoints_are_packed_as_the_json_gives_them(keypoint_json, keypoint_shards) -> None:
    document = json.loads(keypoint_json.read_text())
    manifest, targets = stored(keypoint_shards)
    assert manifest.options["keypoints"] == NAMES and manifest.options["skeleton"] == SKELETON
    assert any(f.name == "keypoints" for f in manifest.sample_fields())
    for sample, image_id in enumerate(targets.image_id.tolist()):
        found = targets.gather(np.array([sample]))
        expected = [a["keypoints"] for a in document["annotations"] if a["image_id"] == image_id]
        assert found.keypoints.shape == (len(expected), len(NAMES), 3)
        assert found.keypoints.reshape(-1).tolist() == np.asarray(expected, np.float32).reshape(-1).tolist()
    item = ShardDataset(keypoint_shards)[0]
    assert item["keypoints"].shape == (len(item["boxes"]), len(NAMES), 3)


def test_a_bad_keypoints_list_rejects_its_annotation_in_one_line(coco_folder, tmp_path) -> None:
    document = keypoint_document(coco_folder[1])
    first, second, third = document["annotations"][:3]
    ids = {first["image_id"], second["image_id"], third["image_id"]}  # their photos alone: fast
    document["images"] = [image for image in document["images"] if image["id"] in ids]
    document["annotations"] = [a for a in document["annotations"] if a["image_id"] in ids]
    first["keypoints"] = first["keypoints"][:-1]  # 14 values, not 3 x 5
    second["keypoints"][2] = 3  # a visibility COCO has not
    third["num_keypoints"] = 5
    path = tmp_path / "person_keypoints.json"
    path.write_text(json.dumps(document))
    done = dataio("convert", "coco", str(coco_folder[0]), str(path), str(tmp_path / "out"), "--workers", "1",
                  "--no-progress")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    for annotation, reason in ((first, "keypoints hold 14 values, not 3 x 5"),
                               (second, "keypoint 0's visibility 3 is not 0, 1 or 2"),
                               (third, "num_keypoints is 5 but 4 keypoints are labelled")):
        assert sum(f"person_keypoints.json#annotation {annotation['id']}: {reason}" in line for line in lines) == 1, \
            lines
    _, targets = stored(tmp_path / "out")
    assert len(targets.values["labels"]) == len(document["annotations"]) - 3


def test_keypoints_without_names_stop_the_conversion_in_one_line(coco_folder, tmp_path) -> None:
    document = keypoint_document(coco_folder[1])
    for category in document["categories"]:
        del category["keypoints"]
    path = tmp_path / "person_keypoints.json"
    path.write_text(json.dumps(document))
    done = dataio("convert", "coco", str(coco_folder[0]), str(path), str(tmp_path / "out"), "--workers", "1",
                  "--no-progress")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "no category lists keypoint names" in done.stderr, \
        done.stderr


def test_a_plain_instances_folder_has_no_keypoints_field(coco_shards) -> None:
    _, manifest = read_manifest(coco_shards)
    assert "keypoints" not in manifest.options and all(f.name != "keypoints" for f in manifest.sample_fields())
    assert "keypoints" not in ShardDataset(coco_shards)[0]
