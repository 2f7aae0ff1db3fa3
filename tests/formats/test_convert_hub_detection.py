"""``dataio convert hub-detection``: Hugging Face detection Parquet (``image`` + ``objects{bbox, category}``) packs
boxes equal to the source's in COCO's frame, the ClassLabel names kept; a bad row costs only its row."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataio import DataLoader
from dataio.formats.coco.hub_detection_source import convert_hub_detection, hub_detection_config
from dataio.formats.dataset.manifest import read_manifest
from tests.formats.detection_layouts import coloured_images
from tests.formats.test_convert_detection_sources import ROOT, dataio, samples_by_path
from tests.formats.journal_stop import Interrupted, interrupt_after
from tests.formats.test_convert_resume import files_of

NAMES = ["Coverall", "Face_Shield", "Gloves"]
# xyxy in pixels, category: one or two objects an image (the images are 300x200, 200x300 or 256x256)
OBJECTS = (((10.0, 20.0, 110.5, 90.25), 0), ((40.0, 30.0, 80.0, 150.0), 2))


def hub_features(names: list[str]) -> bytes:
    """HF ``datasets``' schema metadata for cppe-5's features (objects a struct of lists, category a ClassLabel)."""
    return json.dumps({"info": {"features": {
        "image_id": {"dtype": "int64", "_type": "Value"}, "image": {"_type": "Image"},
        "objects": {"bbox": {"feature": {"feature": {"dtype": "float32", "_type": "Value"}, "length": 4,
                                         "_type": "List"}, "_type": "List"},
                    "category": {"feature": {"names": names, "_type": "ClassLabel"}, "_type": "List"}}}}}).encode()


def encoded(box: tuple[float, ...], bbox_format: str, width: int, height: int) -> list[float]:
    x0, y0, x1, y1 = box
    if bbox_format == "xyxy":
        return [x0, y0, x1, y1]
    if bbox_format == "yolo":
        return [(x0 + x1) / 2 / width, (y0 + y1) / 2 / height, (x1 - x0) / width, (y1 - y0) / height]
    return [x0, y0, x1 - x0, y1 - y0]


def write_hub(path: Path, coloured_folder: Path, *, bbox_format: str = "coco", count: int = 4,
              bad: dict[int, dict] | None = None, sizes: bool = True, row_group_size: int = 64) -> dict[str, list]:
    """A Hub detection Parquet of ``count`` coloured images (``bad``: row -> objects replacing its own);
    {row id: [(category, xyxy)]} of the good rows."""
    from PIL import Image

    rows, expected = [], {}
    for i, source in enumerate(coloured_images(coloured_folder, count)):
        width, height = Image.open(source).size
        objects = OBJECTS[: 1 + i % 2]
        row = {"image_id": 100 + i, "image": {"bytes": source.read_bytes(), "path": source.name},
               "objects": (bad or {}).get(i) or {
                   "id": [10 * i + k for k in range(len(objects))],
                   "bbox": [encoded(box, bbox_format, width, height) for box, _ in objects],
                   "category": [c for _, c in objects]}}
        if sizes:
            row.update(width=width, height=height)
        if i not in (bad or {}):
            expected[f"{path.name}#{i}"] = [(c, list(box)) for box, c in objects]
        rows.append(row)
    objects_type = pa.struct([("id", pa.list_(pa.int64())), ("bbox", pa.list_(pa.list_(pa.float64()))),
                              ("category", pa.list_(pa.int64()))])
    fields = [("image_id", pa.int64()), ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
              ("objects", objects_type)] + ([("width", pa.int32()), ("height", pa.int32())] if sizes else [])
    schema = pa.schema(fields, metadata={"huggingface": hub_features(NAMES)})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, row_group_size=row_group_size)
    return expected


def assert_packed(out: Path, expected: dict[str, list]) -> None:
    samples = samples_by_path(out)
    assert samples.keys() == expected.keys()
    for path, objects in expected.items():
        assert np.allclose(samples[path]["boxes"].numpy(), [box for _, box in objects], atol=1e-3)
        assert samples[path]["labels"].tolist() == [c for c, _ in objects]


@pytest.mark.parametrize("bbox_format", ["coco", "xyxy", "yolo"])
def test_a_hub_detection_parquet_packs_its_boxes_in_cocos_frame_with_its_names(coloured_folder, tmp_path,
                                                                              bbox_format) -> None:
    expected = write_hub(tmp_path / "data/train.parquet", coloured_folder, bbox_format=bbox_format)
    result = dataio("convert", "hub-detection", tmp_path / "data/train.parquet", tmp_path / "out",
                    "--bbox-format", bbox_format)
    assert result.returncode == 0, result.stderr
    assert "packed 4 images with 6 boxes" in result.stdout and result.stderr == ""
    manifest = read_manifest(tmp_path / "out")[1]
    assert manifest.sample_kind == "detection" and manifest.classes == tuple(NAMES)
    assert manifest.options["source"] == "hub-detection"
    assert_packed(tmp_path / "out", expected)
    table = samples_by_path(tmp_path / "out")
    assert [int(s["image_id"]) for s in table.values()] == [100, 101, 102, 103]  # the rows' own image ids
    batch = next(iter(DataLoader(tmp_path / "out", batch_size=4, image_size=64)))
    assert batch["num_boxes"].tolist() == [1, 2, 1, 2]


BAD_OBJECTS = (({"bbox": [[1.0, 2.0, 3.0]], "category": [0]}, "bbox [1.0, 2.0, 3.0] is not 4 finite numbers"),
               ({"bbox": [[1.0, float("nan"), 3.0, 4.0]], "category": [0]}, "is not 4 finite numbers"),
               ({"bbox": [[1.0, 2.0, 30.0, 40.0]], "category": [7]}, "category 7 is not one of the 3 names"),
               ({"bbox": [[1.0, 2.0, 30.0, 40.0]], "category": [0, 1]}, "1 bboxes, 2 categories"))


def test_a_bad_row_costs_only_its_row_listed_in_one_line(coloured_folder, tmp_path) -> None:
    count = len(BAD_OBJECTS) + 3
    bad = {1 + k: {"id": None, **objects} for k, (objects, _) in enumerate(BAD_OBJECTS)}
    source = tmp_path / "train.parquet"
    expected = write_hub(source, coloured_folder, count=count, bad=bad, row_group_size=2)
    # an image that does not decode: the packer rejects its row (the schema's sizes say 300x200)
    table = pq.read_table(source)
    images = table.column("image").to_pylist()
    images[count - 1] = {"bytes": b"\xff\xd8 not a JPEG", "path": "broken.jpg"}
    table = table.set_column(1, "image", pa.array(images, table.schema.field("image").type))
    pq.write_table(table.replace_schema_metadata(pq.read_schema(source).metadata), source, row_group_size=2)
    del expected[f"train.parquet#{count - 1}"]
    result = dataio("convert", "hub-detection", source, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == len(BAD_OBJECTS) + 1 and "Traceback" not in result.stderr
    for k, (_, reason) in enumerate(BAD_OBJECTS):
        assert lines[k].startswith(f"rejected train.parquet#{1 + k}: ") and reason in lines[k], lines[k]
    assert lines[-1].startswith(f"rejected train.parquet#{count - 1}: ")
    listed = [json.loads(line)["path"] for line in (tmp_path / "out/rejected.jsonl").read_text().splitlines()]
    assert listed == [f"train.parquet#{k}" for k in (*bad, count - 1)]
    assert_packed(tmp_path / "out", expected)


def test_names_from_a_classes_file_sizes_from_the_headers(coloured_folder, tmp_path) -> None:
    expected = write_hub(tmp_path / "train.parquet", coloured_folder, sizes=False)
    (tmp_path / "classes.txt").write_text("person\nmask\nglove\n")
    result = dataio("convert", "hub-detection", tmp_path / "train.parquet", tmp_path / "out",
                    "--classes", tmp_path / "classes.txt")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert read_manifest(tmp_path / "out")[1].classes == ("person", "mask", "glove")
    assert_packed(tmp_path / "out", expected)


def test_a_parquet_without_objects_is_refused_and_a_detection_one_is_no_classification_set(coloured_folder, tmp_path) -> None:
    pq.write_table(pa.table({"image": [b"x"], "label": [0]}), tmp_path / "cls.parquet")
    result = dataio("convert", "hub-detection", tmp_path / "cls.parquet", tmp_path / "out")
    assert result.returncode == 2 and "no column 'objects'" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    result = dataio("convert", "hub-detection", tmp_path / "cls.parquet", tmp_path / "out", "--bbox-format", "cxcy")
    assert result.returncode == 2 and "invalid choice" in result.stderr
    write_hub(tmp_path / "det.parquet", coloured_folder, count=1)
    result = dataio("convert", "images", tmp_path / "det.parquet", tmp_path / "out")  # classes, by default
    assert result.returncode == 2 and "a detection Parquet, which dataio convert hub-detection packs" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and not (tmp_path / "out/manifest.json").exists()


def test_a_datasets_built_parquet_with_a_list_of_objects_keeps_its_classlabel_names(coloured_folder,
                                                                                   tmp_path) -> None:
    datasets = pytest.importorskip("datasets")
    images = coloured_images(coloured_folder, 2)
    features = datasets.Features({"image": datasets.Image(), "objects": datasets.List({
        "bbox": datasets.List(datasets.Value("float32"), length=4),
        "category": datasets.ClassLabel(names=["car", "truck"])})})
    objects = [[{"bbox": [5.0, 6.0, 50.0, 40.0], "category": 1}], [{"bbox": [1.0, 2.0, 20.0, 30.0], "category": 0},
                                                                   {"bbox": [60.0, 70.0, 10.0, 10.0], "category": 1}]]
    dataset = datasets.Dataset.from_dict({"image": [{"bytes": p.read_bytes(), "path": None} for p in images],
                                          "objects": objects}, features=features)
    dataset.to_parquet(str(tmp_path / "train-00000-of-00001.parquet"))
    result = dataio("convert", "hub-detection", tmp_path, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert read_manifest(tmp_path / "out")[1].classes == ("car", "truck")
    assert_packed(tmp_path / "out", {
        "train-00000-of-00001.parquet#0": [(1, [5.0, 6.0, 55.0, 46.0])],
        "train-00000-of-00001.parquet#1": [(0, [1.0, 2.0, 21.0, 32.0]), (1, [60.0, 70.0, 70.0, 80.0])]})


def test_an_interrupted_conversion_resumes_to_the_same_bytes(coloured_folder, tmp_path, monkeypatch) -> None:
    write_hub(tmp_path / "train.parquet", coloured_folder, count=9, row_group_size=2)

    def convert(out: Path):
        return convert_hub_detection(hub_detection_config(tmp_path / "train.parquet", out, max_shard_samples=2,
                                                          num_workers=1, progress=False))

    convert(tmp_path / "reference")
    interrupt_after(monkeypatch, 2)  # after 2 shards (4 rows): the rerun streams the Parquet from row 4
    with pytest.raises(Interrupted):
        convert(tmp_path / "out")
    monkeypatch.undo()
    assert convert(tmp_path / "out").num_samples == 9
    assert files_of(tmp_path / "out") == files_of(tmp_path / "reference")


def test_the_hub_detection_block_of_the_docs_runs(tmp_path) -> None:
    section = (ROOT / "docs" / "detection.md").read_text().split("## Other detection formats", 1)[1].split("\n## ")[0]
    block = next(b.split("```", 1)[0] for b in section.split("```python\n")[1:] if "hub-detection" in b)
    result = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[[40.0, 30.0, 140.0, 110.0]] [1] ('Coverall', 'Mask')"
