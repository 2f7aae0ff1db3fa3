"""``dataio convert coco``: boxes, labels and masks packed as drawn, every bad entry rejected with its reason,
targets moved with the image's preparation, resume after a kill, ranks, ``verify``."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image

from dataio.formats.coco.coco_convert import ConvertCocoConfig, convert_coco
from dataio.formats.coco.coco_fields import read_target_arrays
from dataio.formats.coco.synthetic_coco import CATEGORIES, SyntheticCocoConfig, shape_photo, write_coco_folder
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table, write_sample_table
from dataio.formats.dataset.verify import verify
from tests.augment.shape_photos import shape_pixels
from tests.formats.test_convert_resume import files_of, run_until_killed

ROOT = Path(__file__).resolve().parents[2]
coco_mask = pytest.importorskip("pycocotools.mask")


def dataio(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dataio", *args], capture_output=True, text=True, cwd=ROOT)


def table_and_targets(out: Path):
    _, manifest = read_manifest(out)
    table = read_sample_table(out / manifest.sample_table, declared=manifest.table_columns())
    return manifest, table, read_target_arrays(table.table, "masks" in manifest.table_columns())


def stored_masks(table, targets, sample: int) -> np.ndarray:
    found = targets.gather(np.array([sample]))
    size = [int(table.height[sample]), int(table.width[sample])]
    return np.stack([coco_mask.decode({"size": size, "counts": targets.rle(int(row))}) for row in found.mask_rows]) \
        if len(found.mask_rows) else np.zeros((0, *size), np.uint8)


def json_mask(segmentation, height: int, width: int) -> np.ndarray:
    if isinstance(segmentation, list):
        return coco_mask.decode(coco_mask.merge(coco_mask.frPyObjects(segmentation, height, width)))
    return coco_mask.decode({"size": segmentation["size"], "counts": segmentation["counts"].encode()})


def test_boxes_labels_and_masks_are_packed_as_drawn(coco_folder, coco_shards) -> None:
    document = json.loads(coco_folder[1].read_text())
    manifest, table, targets = table_and_targets(coco_shards)
    ids = sorted(cid for cid, _ in CATEGORIES)
    assert manifest.classes == tuple(dict(CATEGORIES)[cid] for cid in ids)
    assert [c[0] for c in manifest.options["categories"]] == ids
    by_image = {image["id"]: [a for a in document["annotations"] if a["image_id"] == image["id"]]
                for image in document["images"]}
    assert sorted(targets.image_id.tolist()) == sorted(by_image)
    for sample, image_id in enumerate(targets.image_id.tolist()):
        annotations = by_image[image_id]
        found = targets.gather(np.array([sample]))
        expected = np.array([[x, y, x + w, y + h] for x, y, w, h in (a["bbox"] for a in annotations)], np.float32)
        assert found.boxes.tolist() == expected.reshape(-1, 4).tolist()
        assert found.labels.tolist() == [ids.index(a["category_id"]) for a in annotations]
        masks = stored_masks(table, targets, sample)
        for mask, annotation in zip(masks, annotations, strict=True):
            assert (mask == json_mask(annotation["segmentation"], *mask.shape)).all()
    assert table.label is None and "label" not in table.table.schema.names  # a sample's classes are its objects'
    assert read_manifest(coco_shards)[1].sample_kind == "detection"
    assert (coco_shards / "rejected.jsonl").read_text() == ""
    assert verify(coco_shards, deep=True).ok


def bad_entries(folder: Path, path: Path) -> dict[str, str]:
    """Add bad images and annotations to the COCO JSON at ``path``; returns {rejected path: reason part}."""
    document = json.loads(path.read_text())
    first = document["images"][0]
    image_id, (w, h) = first["id"], (first["width"], first["height"])
    good = dict(document["annotations"][0])
    bad_annotations = {
        "box outside": {"bbox": [w - 10, 5, 50, 20]}, "negative": {"bbox": [5, 5, -3, 10]},
        "unknown category": {"category_id": 999}, "two points": {"segmentation": [[1, 1, 5, 5]]},
        "odd": {"segmentation": [[1, 1, 5, 5, 9, 1, 3]]}, "rle size": {"segmentation": {"size": [2, 2], "counts": "0"}},
        "rle counts": {"segmentation": {"size": [h, w], "counts": [5, 5]}}, "no image": {"image_id": 424242},
        "crowd": {"iscrowd": 2}, "strings": {"bbox": ["1", "2", "3", "4"]},
        "broken rle": {"segmentation": {"size": [h, w], "counts": "0PXl4"}}}
    reasons = {"box outside": "lies outside the", "negative": "negative or zero size",
               "unknown category": "category_id 999 is not a category", "two points": "polygon 0 has 2 points",
               "odd": "polygon 0 has 3.5 points", "rle size": "RLE size [2, 2] is not the image's",
               "rle counts": "RLE counts do not cover", "no image": "image_id 424242 is not an image",
               "crowd": "iscrowd 2 is not 0 or 1", "strings": "is not four finite numbers",
               "broken rle": "its RLE is not a mask of the"}
    expected = {}
    for n, (name, change) in enumerate(bad_annotations.items()):
        ann_id = 90000 + n
        document["annotations"].append({**good, "id": ann_id, "image_id": image_id, **change})
        expected[f"{path.name}#annotation {ann_id}"] = reasons[name]
    Image.new("RGB", (40, 30), (90, 90, 90)).save(folder / "small.jpg")
    document["images"] += [{"id": 7001, "file_name": "missing.jpg", "width": 10, "height": 10},
                           {"id": 7002, "file_name": "../outside.jpg", "width": 10, "height": 10},
                           {"id": 7003, "file_name": "small.jpg", "width": 30, "height": 40},
                           {"id": 7004, "file_name": first["file_name"], "width": w, "height": h}]
    expected.update({"missing.jpg": "ENOENT", f"{path.name}#image 7002": "is not a relative path",
                     "small.jpg": "the annotations are for a 30x40 image, the file is 40x30",
                     f"{path.name}#image 7004": f"is image {image_id}'s too"})
    path.write_text(json.dumps(document))
    return expected


def test_bad_entries_are_rejected_one_by_one_and_the_rest_is_packed(tmp_path) -> None:
    folder, path = write_coco_folder(tmp_path / "coco", SyntheticCocoConfig(images=3, seed=1))
    good_boxes = len(json.loads(path.read_text())["annotations"])
    expected = bad_entries(folder, path)
    done = dataio("convert", "coco", str(folder), str(path), str(tmp_path / "out"), "--workers", "2", "--no-progress")
    assert done.returncode == 0, done.stderr
    rejected = {json.loads(line)["path"]: json.loads(line)["reason"]
                for line in (tmp_path / "out" / "rejected.jsonl").read_text().splitlines()}
    assert set(rejected) == set(expected)
    for where, reason in expected.items():
        assert reason in rejected[where], (where, rejected[where])
        assert f"rejected {where}: " in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == len(expected)
    _, table, targets = table_and_targets(tmp_path / "out")
    assert len(table) == 3 and int(targets.counts("boxes").sum()) // 4 == good_boxes  # the good ones all kept
    strict = dataio("convert", "coco", str(folder), str(path), str(tmp_path / "strict"), "--strict", "--workers", "1",
                    "--no-progress")
    assert strict.returncode == 1 and (tmp_path / "strict" / "manifest.json").is_file()


@pytest.mark.parametrize("content, message", [
    (b"{not json", "not valid JSON"), (b"[" * 100000 + b"]" * 100000, "nested too deeply"),
    (b'{"images": [], "categories": []}', "lists no categories"),
    (b'{"images": [], "categories": [{"id": 1, "name": "a"}, {"id": 1, "name": "b"}]}', "category id 1 is given twice"),
    (b'{"images": {}, "categories": []}', "no 'images' list"), (b" " * 1_000_001, "file too large")])
def test_a_file_that_is_not_coco_stops_in_one_line(tmp_path, content, message) -> None:
    (tmp_path / "images").mkdir()
    (tmp_path / "instances.json").write_bytes(content)
    done = dataio("convert", "coco", str(tmp_path / "images"), str(tmp_path / "instances.json"), str(tmp_path / "out"),
                  "--max-annotations-size", "1MB", "--no-progress")
    assert done.returncode == 1 and message in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_images_without_annotations_are_kept_or_skipped(coco_folder, coco_shards, tmp_path) -> None:
    _, _, kept = table_and_targets(coco_shards)
    assert len(kept.image_id) == 12 and int((kept.counts("boxes") == 0).sum()) == 2
    summary = convert_coco(ConvertCocoConfig(images=coco_folder[0], annotations=coco_folder[1], out=tmp_path / "out",
                                             skip_empty=True, num_workers=1, progress=False))
    assert "2 without annotations skipped" in summary.line() and summary.num_rejected == 0
    _, _, skipped = table_and_targets(tmp_path / "out")
    assert len(skipped.image_id) == 10 and (skipped.counts("boxes") > 0).all()


def exif_photo(folder: Path, name: str, orientation: int, upright_json: bool, seed: int) -> dict:
    """A 360x240 photo stored with an EXIF orientation; its annotations in the raw pixels (or, with
    ``upright_json``, drawn upright and the JSON giving the upright size)."""
    pixels, shapes = shape_photo(360, 240, np.random.default_rng(seed), 3)
    image = Image.fromarray(pixels)
    turns = {6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270, 3: Image.Transpose.ROTATE_180}
    raw = image.transpose(turns[orientation]) if upright_json else image  # what exif_transpose turns upright
    exif = Image.Exif()
    exif[0x0112] = orientation
    raw.save(folder / name, "JPEG", quality=95, exif=exif.tobytes())
    annotations = []
    for colour, _, mask, _ in shapes:
        ys, xs = np.nonzero(mask)
        rle = coco_mask.encode(np.asfortranarray(mask))
        annotations.append({"category_id": CATEGORIES[colour][0], "bbox": [int(xs.min()), int(ys.min()),
                            int(xs.max() + 1 - xs.min()), int(ys.max() + 1 - ys.min())],
                            "segmentation": {"size": list(mask.shape), "counts": rle["counts"].decode()}})
    return {"image": {"file_name": name, "width": 360, "height": 240}, "annotations": annotations}


def test_exif_turns_and_max_side_move_boxes_and_masks_with_the_pixels(tmp_path) -> None:
    folder = tmp_path / "images"
    folder.mkdir()
    photos = [exif_photo(folder, f"p{o}{int(u)}.jpg", o, u, seed) for seed, (o, u) in
              enumerate([(6, False), (8, False), (3, False), (6, True)])]
    document = {"images": [], "annotations": [], "categories": [{"id": c, "name": n} for c, n in CATEGORIES]}
    for image_id, photo in enumerate(photos, 1):
        document["images"].append({"id": image_id, **photo["image"]})
        first = len(document["annotations"]) + 1  # one id per annotation (an id given twice is refused)
        document["annotations"] += [{"id": first + k, "image_id": image_id, **a}
                                    for k, a in enumerate(photo["annotations"])]
    (tmp_path / "instances.json").write_text(json.dumps(document))
    done = dataio("convert", "coco", str(folder), str(tmp_path / "instances.json"), str(tmp_path / "out"),
                  "--max-side", "200", "--workers", "1", "--no-progress")
    assert done.returncode == 0 and not done.stderr, done.stderr
    _, table, targets = table_and_targets(tmp_path / "out")
    shards = {}
    for sample in range(len(table)):
        shard = int(table.shard[sample])
        shards.setdefault(shard, (tmp_path / "out" / f"shard-{shard:06d}.tar").read_bytes())
        data = shards[shard][int(table.offset[sample]):int(table.offset[sample]) + int(table.size[sample])]
        pixels = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
        portrait = table.path(sample) in ("p60.jpg", "p80.jpg")  # raw-frame annotations, turned upright with it
        assert pixels.shape[:2] == ((200, 133) if portrait else (133, 200))
        found = targets.gather(np.array([sample]))
        for box, label, mask in zip(found.boxes, found.labels, stored_masks(table, targets, sample), strict=True):
            shape = shape_pixels(pixels, int(label))
            ys, xs = np.nonzero(shape)
            bounds = np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
            # the shape inside its box (a star's thin tip may fade below half a pixel when downscaled)
            assert (bounds[:2] >= box[:2] - 2).all() and (bounds[2:] <= box[2:] + 2).all(), (table.path(sample), box)
            assert np.abs(bounds - box).max() <= 4, (table.path(sample), box, bounds)
            assert (mask.astype(bool) & shape).sum() / (mask.astype(bool) | shape).sum() >= 0.85


def coco_command(folder: Path, path: Path):
    return lambda _src, out: [sys.executable, "-m", "dataio", "convert", "coco", str(folder), str(path), str(out),
                              "--workers", "2", "--max-shard-samples", "1", "--no-progress"]


def test_a_killed_conversion_resumes_to_the_same_bytes(coco_folder, tmp_path) -> None:
    command = coco_command(*coco_folder)
    subprocess.run(command(None, tmp_path / "reference"), check=True, capture_output=True, cwd=ROOT)
    reference = files_of(tmp_path / "reference")
    out = tmp_path / "out"
    rng = random.Random(os.getpid())
    kills = sum(run_until_killed(None, out, records, rng.uniform(0, 0.02), command) for records in (2, 5, 9))
    assert kills >= 2, "the conversion outran the kills"
    subprocess.run(command(None, out), check=True, capture_output=True, cwd=ROOT)
    assert files_of(out) == reference


def test_two_ranks_merge_to_the_targets_of_one_process(coco_folder, coco_shards, tmp_path) -> None:
    for rank in (1, 0):
        convert_coco(ConvertCocoConfig(images=coco_folder[0], annotations=coco_folder[1], out=tmp_path / "out",
                                       max_shard_samples=4, num_workers=1, progress=False, rank=rank, world_size=2))
    assert verify(tmp_path / "out", deep=True).ok
    (_, one, a), (_, merged, b) = table_and_targets(coco_shards), table_and_targets(tmp_path / "out")
    for name in ("image_id", "boxes", "labels", "iscrowd", "masks", "path", "width", "xxh3"):
        assert one.table.column(name).to_pylist() == merged.table.column(name).to_pylist(), name


def test_verify_names_rows_whose_targets_are_damaged(coco_shards, tmp_path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for path in coco_shards.iterdir():
        (out / path.name).write_bytes(path.read_bytes())
    table = read_sample_table(out / "samples.arrow", declared=read_manifest(out)[1].table_columns()).table
    labels = table.column("labels").to_pylist()
    boxes = table.column("boxes").to_pylist()
    labels[1] = labels[1] + [0]  # one label too many
    boxes[2][2] = 5000.0  # past the image's edge
    masks = table.column("masks").to_pylist()
    masks[3][0] = b"0PXl4"  # runs past the image
    columns = {name: table.column(name) for name in table.schema.names}
    for name, values in (("labels", labels), ("boxes", boxes), ("masks", masks)):
        columns[name] = pa.array(values, table.schema.field(name).type)
    write_sample_table(out / "samples.arrow", columns)
    problems = verify(out, deep=True).problems
    keys = table.column("key").to_pylist()
    assert any(keys[1] in p and "4 boxes but 5 labels" in p for p in problems), problems
    assert any(keys[2] in p and "is not inside its" in p for p in problems), problems
    assert any(keys[3] in p and "a mask is not an RLE" in p for p in problems), problems
    assert len(problems) == 3
