"""Hostile pass over issue 43's converters (attacker A): YOLO, Pascal VOC, Hub detection Parquet, LVIS and the
``convert images`` layout refusal, run as a user meets them (the CLI in a subprocess, exit code and stderr)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataio.formats.dataset.manifest import read_manifest
from tests.clients.conftest import client_env  # noqa: F401 - the clients room's fixture
from tests.formats.detection_layouts import coloured_images, write_voc, write_yolo
from tests.formats.test_convert_detection_sources import ROOT, dataio
from tests.formats.test_convert_hub_detection import write_hub


def one_line_error(result: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr[-2000:]


# --- YOLO -------------------------------------------------------------------------------------------------------

def test_yolo_data_yaml_names_with_mixed_keys_is_one_line(coloured_folder, tmp_path) -> None:
    """data.yaml ``names: {0: cat, x: dog}``: now a TypeError traceback (sorted() of int and str keys); should be
    one line naming data.yaml, exit 1 or 2."""
    write_yolo(tmp_path / "yolo", coloured_folder)
    (tmp_path / "yolo" / "data.yaml").write_text("names:\n  0: cat\n  x: dog\n")
    result = dataio("convert", "yolo", tmp_path / "yolo", tmp_path / "out", "--split", "train")
    assert result.returncode in (1, 2)
    one_line_error(result)
    assert "data.yaml" in result.stderr


def test_yolo_deeply_nested_data_yaml_is_one_line(coloured_folder, tmp_path) -> None:
    """A 10 KB data.yaml nesting 5000 lists: now a RecursionError traceback out of PyYAML; should be one line
    naming data.yaml, exit 1 or 2."""
    write_yolo(tmp_path / "yolo", coloured_folder)
    (tmp_path / "yolo" / "data.yaml").write_text("names: " + "[" * 5000 + "]" * 5000 + "\n")
    result = dataio("convert", "yolo", tmp_path / "yolo", tmp_path / "out", "--split", "train")
    assert result.returncode in (1, 2)
    one_line_error(result)
    assert "data.yaml" in result.stderr


def test_yolo_class_of_a_unicode_digit_rejects_its_image_alone(coloured_folder, tmp_path) -> None:
    """A label line whose class is '²' (str.isdigit() is True, int() refuses it): now the whole conversion stops
    with exit 2 and ``invalid literal for int() with base 10: '²'`` naming no file; should reject that image alone
    in one line naming labels/train/im0.txt:LINE, the other 3 images packed, exit 0 (as for any bad label line)."""
    write_yolo(tmp_path / "yolo", coloured_folder)
    with open(tmp_path / "yolo/labels/train/im0.txt", "a", encoding="utf-8") as f:
        f.write("\u00b2 0.5 0.5 0.1 0.1\n")
    result = dataio("convert", "yolo", tmp_path / "yolo", tmp_path / "out", "--split", "train")
    assert result.returncode == 0, result.stderr
    assert "labels/train/im0.txt:2" in result.stderr
    assert "packed 3 images" in result.stdout


def test_yolo_folder_of_coco_named_splits_without_split_is_refused(coloured_folder, tmp_path) -> None:
    """Ultralytics' coco.yaml layout: images/train2017 and images/val2017 (same for labels/). Without --split it
    now packs both splits into one set with exit 0 (8 images: val mixed into train, silently); the docs promise
    'a YOLO folder of several splits without --split is one line, exit 2' - only train/val/valid/test are seen."""
    src = tmp_path / "yolo"
    write_yolo(src, coloured_folder, split="train2017")
    for top in ("images", "labels"):
        shutil.copytree(src / top / "train2017", src / top / "val2017")
    result = dataio("convert", "yolo", src, tmp_path / "out")
    assert result.returncode == 2, result.stdout
    one_line_error(result)
    assert "--split" in result.stderr and "val2017" in result.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_control_yolo_split_train_packs(coloured_folder, tmp_path) -> None:
    """Control (holds): the plain YOLO folder with --split train packs its 4 images."""
    write_yolo(tmp_path / "yolo", coloured_folder)
    result = dataio("convert", "yolo", tmp_path / "yolo", tmp_path / "out", "--split", "train")
    assert result.returncode == 0 and "packed 4 images with 6 boxes" in result.stdout, result.stderr


def test_control_yolo_label_linked_out_of_the_tree_rejects_its_image(coloured_folder, tmp_path) -> None:
    """Control (holds): a label file that is a link to a file outside SRC is refused for that image only."""
    write_yolo(tmp_path / "yolo", coloured_folder)
    (tmp_path / "secret.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    label = tmp_path / "yolo/labels/train/im0.txt"
    label.unlink()
    label.symlink_to(tmp_path / "secret.txt")
    result = dataio("convert", "yolo", tmp_path / "yolo", tmp_path / "out", "--split", "train")
    assert "Traceback" not in result.stderr
    assert "im0" in result.stderr and "packed 3 images" in result.stdout, (result.stdout, result.stderr)


# --- convert images: false refusals of classification sets ----------------------------------------------------

@pytest.mark.parametrize("classes", [("images", "labels"), ("Annotations", "JPEGImages")])
def test_convert_images_takes_classes_that_happen_to_be_named_like_detection_folders(coloured_folder, tmp_path,
                                                                                      classes) -> None:
    """A classification set whose two class folders are named images/labels (or JPEGImages/Annotations), each
    holding only JPEGs (no YOLO .txt, no VOC .xml): now refused, exit 2, 'a YOLO detection folder ... not class
    folders'; it is a sound ImageFolder set (torchvision's ImageFolder reads it) and should pack as 2 classes."""
    src = tmp_path / "src"
    images = coloured_images(coloured_folder, 6)
    for k, name in enumerate(classes):
        (src / name).mkdir(parents=True)
        for i, image in enumerate(images[k::2]):
            shutil.copy(image, src / name / f"{i}.jpg")
    result = dataio("convert", "images", src, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert read_manifest(tmp_path / "out")[1].classes == tuple(sorted(classes))


# --- Pascal VOC --------------------------------------------------------------------------------------------------

def test_voc_splits_of_one_folder_get_the_same_labels(coloured_folder, tmp_path) -> None:
    """One VOC folder, trainval naming only VOC classes, test naming also 'pedestrian'. The docs: 'VOC's 20 classes
    in VOC's order (each split the same labels)'. Now trainval gets VOC's 20 (dog = 11) and test gets the folder's
    sorted names (dog = 0): a model trained on one is scored on the other with shifted labels, exit 0 both."""
    src = tmp_path / "voc"
    write_voc(src, coloured_folder)
    last = sorted((src / "Annotations").glob("*.xml"))[-1]
    last.write_text(last.read_text().replace("<name>person<", "<name>pedestrian<"))
    ids = sorted(p.stem for p in (src / "Annotations").glob("*.xml"))
    (src / "ImageSets/Main/trainval.txt").write_text("".join(f"{i}\n" for i in ids[:-1]))
    (src / "ImageSets/Main/test.txt").write_text(f"{ids[-1]}\n")
    classes = {}
    for split in ("trainval", "test"):
        result = dataio("convert", "voc", src, tmp_path / split, "--split", split)
        assert result.returncode == 0, result.stderr
        classes[split] = read_manifest(tmp_path / split)[1].classes
    assert classes["trainval"] == classes["test"]


def test_a_voc_annotation_of_millions_of_elements_stays_bounded(coloured_folder, tmp_path) -> None:
    """One Annotations/*.xml of 15.6 MB (under the 16 MiB label cap) holding 3.9 M empty elements: the parser keeps
    an Element object per element (986 MB resident, 38 s on this VM). Under ``prlimit --as=1000000000``, where the
    plain folder converts, the run now dies with a MemoryError cascade (exit 1, 'Exception ignored ...'); it should
    reject that file in one line (it has no <size>) and pack the other 3 images."""
    src = tmp_path / "voc"
    write_voc(src, coloured_folder)
    bomb = sorted((src / "Annotations").glob("*.xml"))[1]
    bomb.write_text("<annotation>" + "<a/>" * 3_900_000 + "</annotation>")
    command = ["prlimit", "--as=1000000000", sys.executable, "-m", "dataio", "convert", "voc", str(src),
               str(tmp_path / "out"), "--split", "trainval", "--workers", "1", "--no-progress"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-1500:]
    assert bomb.name in result.stderr and "packed 3 images" in result.stdout


def test_control_voc_doctype_bomb_rejected_unexpanded(coloured_folder, tmp_path) -> None:
    """Control (holds): a billion-laughs DOCTYPE in one annotation rejects that image only."""
    src = tmp_path / "voc"
    write_voc(src, coloured_folder)
    bomb = sorted((src / "Annotations").glob("*.xml"))[0]
    bomb.write_text('<?xml version="1.0"?><!DOCTYPE a [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">'
                    ']><annotation>&b;</annotation>')
    result = dataio("convert", "voc", src, tmp_path / "out", "--split", "trainval")
    assert result.returncode == 0 and "packed 3 images" in result.stdout, result.stderr
    assert "DOCTYPE" in result.stderr


# --- Hub detection Parquet ---------------------------------------------------------------------------------------

def _retable(path: Path, *, metadata: bytes | None = None, image_ids: list[int] | None = None) -> None:
    table = pq.read_table(path)
    if image_ids is not None:
        table = table.set_column(table.schema.get_field_index("image_id"), "image_id", pa.array(image_ids, pa.int64()))
    if metadata is not None:
        table = table.replace_schema_metadata({b"huggingface": metadata})
    pq.write_table(table, path)


def test_hub_detection_deeply_nested_schema_metadata_is_one_line(coloured_folder, tmp_path) -> None:
    """The schema's 'huggingface' metadata is a 400 KB JSON nesting 200000 lists: now a RecursionError traceback
    out of json.loads; should be one line naming the file (or the metadata ignored), no traceback."""
    path = tmp_path / "src" / "train.parquet"
    write_hub(path, coloured_folder)
    _retable(path, metadata=b'{"info": {"features": ' + b"[" * 200_000 + b"]" * 200_000 + b"}}")
    result = dataio("convert", "hub-detection", path.parent, tmp_path / "out")
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr, result.stderr[-1500:]
    assert result.returncode in (0, 1, 2)
    if result.returncode:
        one_line_error(result)
        assert "train.parquet" in result.stderr


def test_hub_detection_rows_sharing_an_image_id_keep_their_own_objects(coloured_folder, tmp_path) -> None:
    """Rows 0 and 1 of a Hub Parquet give the same image_id (a folder of files whose ids restart does the same).
    Each row holds its own objects, so which image they belong to is known; now both rows' boxes are rejected
    ('image_id 100 is given to 2 images (which one it belongs to is unknown)') and with every id shared the run
    exits 1 'no image converted'. One repeated id should cost nothing (ids renumbered, or the repeat named in one
    line): all 4 rows packed with their boxes."""
    path = tmp_path / "src" / "train.parquet"
    write_hub(path, coloured_folder)
    _retable(path, image_ids=[100, 100, 102, 103])
    result = dataio("convert", "hub-detection", path.parent, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert "packed 4 images with 6 boxes" in result.stdout, (result.stdout, result.stderr)


def test_yolo_box_past_the_image_edge_is_named_by_its_label_file_and_line(coloured_folder, tmp_path) -> None:
    """``0 0.9 0.5 0.5 0.2``: every value in 0..1 (Ultralytics takes the line and clips the box at the edge), but
    the box passes the right edge. Now the object is dropped with ``rejected labels#annotation 1: bbox [...] lies
    outside the ...`` - 'labels' and an annotation number dataio invented, neither the file nor its line. The
    docs' rule for YOLO is one line naming the file and line (``labels/train/im1.txt:2: ...``); the object should
    be kept clipped as Ultralytics keeps it, or the line named."""
    write_yolo(tmp_path / "yolo", coloured_folder)
    (tmp_path / "yolo/labels/train/im0.txt").write_text("0 0.5 0.5 0.2 0.2\n0 0.9 0.5 0.5 0.2\n")
    result = dataio("convert", "yolo", tmp_path / "yolo", tmp_path / "out", "--split", "train")
    assert result.returncode == 0, result.stderr
    clipped = "rejected" not in result.stderr and "packed 4 images with 7 boxes" in result.stdout
    named = "labels/train/im0.txt:2" in result.stderr
    assert clipped or named, (result.stdout, result.stderr)


# --- brace patterns ----------------------------------------------------------------------------------------------

def test_a_brace_pattern_of_a_huge_range_is_refused_without_expanding_it(coloured_folder, tmp_path) -> None:
    """``ShardDataset('OUT/shard-{000000..099999999}.tar')`` on an indexed 1-shard folder: ``expand`` builds every
    one of the 10**8 names before comparing them with the folder's 1 shard (34 s and a bare MemoryError under
    ``prlimit --as=3e9`` on this VM; without a limit, many GB). The count is known from the bounds: it should be
    the documented one line (a pattern naming other than the folder's shards), at once, in bounded memory."""
    write_yolo(tmp_path / "yolo", coloured_folder)
    assert dataio("convert", "yolo", tmp_path / "yolo", tmp_path / "out", "--split", "train").returncode == 0
    code = ("import sys\nfrom dataio import ShardDataset\ntry:\n    ShardDataset(sys.argv[1])\n"
            "except Exception as e:\n    print(type(e).__name__, str(e)[:300])\n")
    pattern = str(tmp_path / "out" / "shard-{000000..099999999}.tar")
    result = subprocess.run(["prlimit", "--as=1500000000", sys.executable, "-c", code, pattern], capture_output=True,
                            text=True, cwd=ROOT, timeout=240)
    assert "MemoryError" not in result.stdout + result.stderr, (result.stdout, result.stderr[-800:])
    assert result.stdout.startswith("ManifestError") and "give the folder" in result.stdout, result.stdout


def test_control_a_brace_pattern_naming_the_folders_shards_reads_it(coloured_folder, tmp_path) -> None:
    """Control (holds): the pattern naming the folder's one shard reads as the folder."""
    write_yolo(tmp_path / "yolo", coloured_folder)
    assert dataio("convert", "yolo", tmp_path / "yolo", tmp_path / "out", "--split", "train").returncode == 0
    from dataio import ShardDataset

    assert len(ShardDataset(str(tmp_path / "out" / "shard-{000000..000000}.tar"))) == 4


# --- interruption and resume -------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["yolo", "voc"])
def test_an_interrupted_yolo_or_voc_conversion_resumes_to_the_same_bytes(coloured_folder, tmp_path, monkeypatch,
                                                                         layout) -> None:
    """Control: killed after its second shard, the rerun ends in the bytes of an uninterrupted run."""
    from dataio.formats.coco.voc_source import convert_voc, voc_config
    from dataio.formats.coco.yolo_source import convert_yolo, yolo_config
    from tests.formats.journal_stop import Interrupted, interrupt_after
    from tests.formats.test_convert_resume import files_of

    src = tmp_path / "src"
    if layout == "yolo":
        write_yolo(src, coloured_folder, count=7)
    else:
        write_voc(src, coloured_folder, count=7)

    def convert(out: Path):
        if layout == "yolo":
            return convert_yolo(yolo_config(src, out, "train", max_shard_samples=2, num_workers=1, progress=False))
        return convert_voc(voc_config(src, out, "trainval", max_shard_samples=2, num_workers=1, progress=False))

    convert(tmp_path / "reference")
    interrupt_after(monkeypatch, 2)
    with pytest.raises(Interrupted):
        convert(tmp_path / "out")
    monkeypatch.undo()
    assert convert(tmp_path / "out").num_samples == 7
    assert files_of(tmp_path / "out") == files_of(tmp_path / "reference")


# --- tokenizers at pack time -------------------------------------------------------------------------------------

def test_an_hf_tokenizer_folder_with_a_huge_tokenizer_json_is_refused_naming_it(client_env, tmp_path) -> None:
    """``--tokenizer hf:DIR`` where DIR/tokenizer.json is a 3 GB sparse file (regular, as ``stat`` says): transformers
    reads it whole, outside dataio's file gate and its size bounds. Under ``prlimit --as=2.5e9`` the run now ends
    ``--tokenizer hf:DIR: MemoryError: `` (no file, no size, no bound; without a limit it takes the 3 GB). It
    should be refused from the size before reading, in one line naming tokenizer.json."""
    from dataio.formats.pairs.synthetic_pair_writers import write_img2dataset
    from dataio.formats.pairs.synthetic_pairs import SyntheticPairsConfig
    folder = tmp_path / "tars"
    write_img2dataset(folder, SyntheticPairsConfig(count=4, samples_per_shard=4, failed_fraction=0.0, seed=3))
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
    with open(hf / "tokenizer.json", "wb") as f:
        f.truncate(3 << 30)
    done = subprocess.run(["prlimit", "--as=2500000000", sys.executable, "-m", "dataio", "index", str(folder),
                           "--tokenizer", f"hf:{hf}", "--no-progress"], capture_output=True, text=True, cwd=tmp_path,
                          env={**client_env, "DATAIO_NUM_WORKERS": "1"}, timeout=240)
    assert done.returncode in (1, 2), done.stderr[-1500:]
    one_line_error(done)
    assert "tokenizer.json" in done.stderr and "MemoryError" not in done.stderr, done.stderr
    assert not (folder / "manifest.json").exists()


# --- COCO keypoints ----------------------------------------------------------------------------------------------

def test_a_keypoints_file_with_a_box_only_category_listing_no_keypoints_converts(coloured_folder, tmp_path) -> None:
    """Datumaro's (CVAT's) COCO person-keypoints export writes ``"keypoints": [], "skeleton": []`` for every category
    without points, next to the person's 17 names; pycocotools reads such a file. Now the whole conversion stops,
    exit 1, ``categories[1].keypoints is not a list of 1 to 1024 distinct one-line names``; an empty list names no
    points (as a missing one) and the file should pack: 2 images, the person's points kept."""
    images = coloured_images(coloured_folder, 2)
    from PIL import Image

    entries = []
    for i, source in enumerate(images, 1):
        width, height = Image.open(source).size
        entries.append({"id": i, "file_name": source.name, "width": width, "height": height})
    (tmp_path / "im").mkdir()
    for source in images:
        shutil.copy(source, tmp_path / "im" / source.name)
    document = {"images": entries, "annotations": [
        {"id": 1, "image_id": 1, "category_id": 1, "bbox": [10, 10, 40, 40], "area": 1600, "iscrowd": 0,
         "keypoints": [20, 20, 2, 30, 30, 2], "num_keypoints": 2},
        {"id": 2, "image_id": 2, "category_id": 2, "bbox": [10, 10, 40, 40], "area": 1600, "iscrowd": 0,
         "keypoints": [], "num_keypoints": 0}],
        "categories": [{"id": 1, "name": "person", "supercategory": "", "keypoints": ["nose", "eye"],
                        "skeleton": [[1, 2]]},
                       {"id": 2, "name": "car", "supercategory": "", "keypoints": [], "skeleton": []}]}
    (tmp_path / "kp.json").write_text(json.dumps(document))
    result = dataio("convert", "coco", tmp_path / "im", tmp_path / "kp.json", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert "packed 2 images with 2 boxes" in result.stdout, result.stdout
