"""``dataio convert yolo`` and ``dataio convert voc``: boxes equal the source's in COCO's frame, class names kept,
the detection loader reads the result; bad label lines and XML bombs reject their image in one line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dataio import ShardDataset
from dataio.formats.coco.voc_source import VOC_CLASSES, convert_voc, voc_config
from dataio.formats.coco.voc_xml import parse_xml
from dataio.formats.coco.yolo_source import convert_yolo, yolo_config
from dataio.formats.dataset.manifest import read_manifest
from tests.formats.detection_layouts import YOLO_NAMES, write_voc, write_yolo

ROOT = Path(__file__).resolve().parents[2]


def dataio(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dataio", *map(str, args), "--workers", "1", "--no-progress"],
                          capture_output=True, text=True, cwd=ROOT)


def samples_by_path(out: Path) -> dict[str, dict]:
    from dataio.formats.dataset.sample_table import read_sample_table

    manifest = read_manifest(out)[1]
    table = read_sample_table(out / manifest.sample_table, declared=manifest.table_columns())
    dataset = ShardDataset(out)
    return {table.table.column("path")[i].as_py(): dataset[i] for i in range(len(dataset))}


def test_a_yolo_folder_packs_its_boxes_in_cocos_frame_with_its_names(coloured_folder, tmp_path) -> None:
    expected = write_yolo(tmp_path / "yolo", coloured_folder)
    result = dataio("convert", "yolo", tmp_path / "yolo", tmp_path / "out", "--split", "train")
    assert result.returncode == 0, result.stderr
    assert "packed 4 images with 6 boxes" in result.stdout and result.stderr == ""
    manifest = read_manifest(tmp_path / "out")[1]
    assert manifest.sample_kind == "detection" and manifest.classes == YOLO_NAMES
    assert manifest.options["source"] == "yolo" and manifest.options["categories"][0][:2] == [0, "cat"]
    samples = samples_by_path(tmp_path / "out")
    assert samples.keys() == expected.keys()
    for path, objects in expected.items():
        assert np.allclose(samples[path]["boxes"].numpy(), [box for _, box in objects], atol=1e-3)
        assert samples[path]["labels"].tolist() == [cls for cls, _ in objects]
    batch = next(iter(__import__("dataio").DataLoader(tmp_path / "out", batch_size=4, image_size=64)))
    assert batch["num_boxes"].tolist() == [1, 2, 1, 2]


BAD_LINES = (("0 0.5 0.5 1.2 0.3", "outside 0..1"), ("0 0.5 0.5 0.2", "4 values"),
             ("0 0.1 0.1 0.2 0.2 0.3 0.3 0.1 0.2", "9 values"), ("7 0.5 0.5 0.2 0.2", "class 7 is not one of the 3"),
             ("cat 0.5 0.5 0.2 0.2", "not a non-negative integer"), ("0 0.5 nan 0.2 0.2", "outside 0..1"),
             ("0 0.5 0.5 0 0.2", "zero width or height"))


def test_a_bad_yolo_label_line_rejects_its_image_in_one_line(coloured_folder, tmp_path) -> None:
    write_yolo(tmp_path / "yolo", coloured_folder, count=len(BAD_LINES) + 1)
    for i, (line, _) in enumerate(BAD_LINES, 1):
        (tmp_path / f"yolo/labels/train/im{i}.txt").write_text(f"2 0.5 0.5 0.2 0.2\n{line}\n")
    config = yolo_config(tmp_path / "yolo", tmp_path / "out", split="train", num_workers=1, progress=False)
    summary = convert_yolo(config)
    assert summary.num_samples == 1 and summary.num_boxes == 1
    assert [r["path"] for r in summary.rejected] == [f"labels/train/im{i}.txt:2" for i in range(1, 8)]
    for rejected, (_, reason) in zip(summary.rejected, BAD_LINES, strict=True):
        assert reason in rejected["reason"] and "\n" not in rejected["reason"]
    listed = [json.loads(line) for line in (tmp_path / "out/rejected.jsonl").read_text().splitlines()]
    assert listed == [dict(r) for r in summary.rejected]


def test_the_yolo_cli_lists_rejections_and_refuses_a_folder_of_splits(coloured_folder, tmp_path) -> None:
    write_yolo(tmp_path / "yolo", coloured_folder)
    (tmp_path / "yolo/images/val").mkdir()
    (tmp_path / "yolo/labels/train/im0.txt").write_text("0 0.5 0.5 1.5 0.3\n")
    result = dataio("convert", "yolo", tmp_path / "yolo", tmp_path / "out")
    assert result.returncode == 2 and "splits train, val: give the one to pack (--split)" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    result = dataio("convert", "yolo", tmp_path / "yolo", tmp_path / "out", "--split", "train", "--strict")
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        "rejected labels/train/im0.txt:1: '0 0.5 0.5 1.5 0.3' holds a coordinate outside 0..1 (YOLO's are "
        "normalised to the image)"]


def test_a_voc_folder_packs_its_boxes_in_cocos_frame_difficult_as_crowd(coloured_folder, tmp_path) -> None:
    expected = write_voc(tmp_path / "voc", coloured_folder)
    result = dataio("convert", "voc", tmp_path / "voc", tmp_path / "out")
    assert result.returncode == 2 and "give the one to pack (--split)" in result.stderr
    result = dataio("convert", "voc", tmp_path / "voc", tmp_path / "out", "--split", "trainval")
    assert result.returncode == 0, result.stderr
    manifest = read_manifest(tmp_path / "out")[1]
    assert manifest.sample_kind == "detection" and manifest.classes == VOC_CLASSES
    samples = samples_by_path(tmp_path / "out")
    assert samples.keys() == expected.keys()
    for path, objects in expected.items():
        assert np.allclose(samples[path]["boxes"].numpy(), [box for _, box, _ in objects], atol=1e-3)
        assert [VOC_CLASSES[k] for k in samples[path]["labels"].tolist()] == [name for name, _, _ in objects]
        assert samples[path]["iscrowd"].tolist() == [difficult for *_, difficult in objects]
    val = convert_voc(voc_config(tmp_path / "voc", tmp_path / "val", split="val", num_workers=1, progress=False))
    assert val.num_samples == 2 and read_manifest(tmp_path / "val")[1].classes == VOC_CLASSES  # the same labels


def _bomb() -> bytes:
    """Billion laughs: 10 entities each 10 of the one before, 10**9 'lol's expanded."""
    entities = ['<!ENTITY lol0 "lol">'] + [f'<!ENTITY lol{k} "{f"&lol{k - 1};" * 10}">' for k in range(1, 10)]
    return (f'<?xml version="1.0"?>\n<!DOCTYPE lolz [{"".join(entities)}]>\n'
            "<annotation><filename>&lol9;</filename></annotation>\n").encode()


BOMB = _bomb()


def test_an_xml_bomb_or_external_entity_rejects_its_image_unexpanded(coloured_folder, tmp_path) -> None:
    started = time.perf_counter()
    with pytest.raises(ValueError, match="DOCTYPE"):
        parse_xml(BOMB)
    with pytest.raises(ValueError, match="DOCTYPE"):
        parse_xml(b'<!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]><annotation>&x;</annotation>')
    assert time.perf_counter() - started < 1
    write_voc(tmp_path / "voc", coloured_folder)
    (tmp_path / "voc/Annotations/2008_000001.xml").write_bytes(BOMB)
    (tmp_path / "voc/Annotations/2008_000002.xml").write_text("<annotation><size>")
    result = dataio("convert", "voc", tmp_path / "voc", tmp_path / "out", "--split", "trainval")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "rejected Annotations/2008_000001.xml: it declares a DOCTYPE or entities, which annotation files have no "
        "use for (refused, never expanded)",
        "rejected Annotations/2008_000002.xml: not well-formed XML (no element found at line 1)"]
    assert "packed 2 images" in result.stdout
