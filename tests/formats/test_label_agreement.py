"""Labels agree with torchvision's ImageFolder on the same folder, or the difference is said at conversion.

torchvision does not import on the test machine, so ``imagefolder_classes`` is its ``find_classes``, line for line
(torchvision/datasets/folder.py: ``sorted(entry.name for entry in os.scandir(directory) if entry.is_dir())``): every
folder at the top, dot-folders included.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from PIL import Image

from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table

ROOT = Path(__file__).resolve().parents[2]


def imagefolder_classes(src: Path) -> list[str]:
    return sorted(entry.name for entry in os.scandir(src) if entry.is_dir())


def picture(path: Path, fmt: str = "JPEG", colour: tuple[int, int, int] = (200, 40, 40)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (16, 12), colour).save(path, format=fmt)


def convert(src: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "dataio", "convert", "images", str(src), str(out), "--no-progress",
               "--workers", "1", *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)


def rejected_of(out: Path) -> dict[str, str]:
    return {r["path"]: r["reason"] for r in map(json.loads, (out / "rejected.jsonl").read_text().splitlines())}


def packed(out: Path) -> tuple[tuple[str, ...], dict[str, int]]:
    folder, manifest = read_manifest(out)
    table = read_sample_table(folder / manifest.sample_table).table
    return manifest.classes, dict(zip(table.column("path").to_pylist(), table.column("label").to_pylist(), strict=True))


def test_a_hidden_class_folder_with_images_is_said_in_one_line_and_strict_fails(tmp_path):
    src = tmp_path / "src"
    for name in ("cat", "dog"):
        for i in range(2):
            picture(src / name / f"{i}.jpg")
    picture(src / ".ipynb_checkpoints" / "0-checkpoint.jpg")
    picture(src / ".ipynb_checkpoints" / "deep" / "1-checkpoint.png", "PNG")
    (src / ".git").mkdir()  # a hidden folder without images: ImageFolder could not even be built on it; not listed
    (src / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    done = convert(src, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    line = [line for line in done.stderr.splitlines() if ".ipynb_checkpoints" in line]
    assert len(line) == 1 and "2 image(s)" in line[0], done.stderr
    reference = imagefolder_classes(src)  # ['.git', '.ipynb_checkpoints', 'cat', 'dog']
    assert f"make it class {reference.index('.ipynb_checkpoints')}" in line[0]
    assert "labels of the 2 class(es) after it" in line[0]
    classes, labels = packed(tmp_path / "out")
    assert classes == ("cat", "dog")
    assert rejected_of(tmp_path / "out").keys() == {".ipynb_checkpoints"}
    # once the folder is gone, as the line says, ImageFolder's classes are dataio's, label for label
    for path, label in labels.items():
        assert classes[label] == path.split("/")[0]
    assert [c for c in reference if c not in (".git", ".ipynb_checkpoints")] == list(classes)
    assert convert(src, tmp_path / "strict", "--strict").returncode == 1


def test_hidden_files_and_folders_inside_a_class_are_listed(tmp_path):
    src = tmp_path / "src"
    picture(src / "cat" / "0.jpg")
    picture(src / "cat" / "._0.jpg")  # macOS AppleDouble: ImageFolder reads it as a sample (and fails to decode)
    picture(src / "cat" / ".ipynb_checkpoints" / "0-checkpoint.jpg")
    (src / "cat" / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    done = convert(src, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    rejected = rejected_of(tmp_path / "out")
    assert rejected.keys() == {"cat/._0.jpg", "cat/.ipynb_checkpoints"}
    assert "ImageFolder would read it as a sample of class 'cat'" in rejected["cat/._0.jpg"]
    assert rejected["cat/.ipynb_checkpoints"].startswith("hidden folder holding 1 image(s)")
    assert packed(tmp_path / "out")[1] == {"cat/0.jpg": 0}


def test_an_output_folder_inside_the_source_is_refused_before_anything_is_written(tmp_path):
    src = tmp_path / "src"
    for name in ("a", "b"):
        picture(src / name / "0.jpg")
    for out in (src / "shards", src / "a" / "deeper", src):
        done = convert(src, out)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "is inside the source folder" in lines[0] and "Traceback" not in done.stderr
    assert not (src / "shards").exists() and not (src / "a" / "deeper").exists()
    assert not (src / "manifest.json").exists()


def test_an_earlier_output_inside_the_source_is_not_a_class(tmp_path):
    """A first output moved (or written by an older dataio) into the source: converting again skips it, in one
    line, instead of packing it as a class that shifts every label after it."""
    src = tmp_path / "src"
    for name in ("a", "z"):
        picture(src / name / "0.jpg")
    assert convert(src, tmp_path / "first").returncode == 0
    (tmp_path / "first").rename(src / "m-shards")  # sorts between a and z
    done = convert(src, tmp_path / "second")
    assert done.returncode == 0, done.stderr
    classes, labels = packed(tmp_path / "second")
    assert classes == ("a", "z") and labels == {"a/0.jpg": 0, "z/0.jpg": 1}
    assert [line for line in done.stderr.splitlines() if "m-shards" in line] == [
        "rejected m-shards: " + rejected_of(tmp_path / "second")["m-shards"]]
    assert "holds a dataio output (manifest.json)" in rejected_of(tmp_path / "second")["m-shards"]


def test_pictures_imagefolder_does_not_list_are_listed_with_the_reason(tmp_path):
    src = tmp_path / "src"
    picture(src / "a" / "0.jpg")
    picture(src / "a" / "anim.gif", "GIF")
    picture(src / "a" / "photo.jfif")
    (src / "a" / "phone.HEIC").write_bytes(b"\x00\x00\x00\x18ftypheic" + bytes(64))  # no PIL plugin needed to list it
    (src / "a" / "web.avif").write_bytes(b"\x00\x00\x00\x1cftypavif" + bytes(64))
    picture(src / "a" / "scraped_0001")  # a JPEG saved without an extension
    (src / "a" / "notes.txt").write_text("not a picture\n")
    (src / "a" / "README").write_text("not a picture either\n")
    picture(src / "stray.png", "PNG")
    done = convert(src, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    rejected = rejected_of(tmp_path / "out")
    assert rejected.keys() == {"a/anim.gif", "a/photo.jfif", "a/phone.HEIC", "a/web.avif", "a/scraped_0001",
                               "stray.png"}
    for name, extension in (("anim.gif", ".gif"), ("photo.jfif", ".jfif"), ("phone.HEIC", ".heic"),
                            ("web.avif", ".avif")):
        assert rejected[f"a/{name}"].startswith(f"extension {extension} is not packed: torchvision's ImageFolder")
    assert rejected["a/scraped_0001"].startswith("a JPEG image by its first bytes, without an extension")
    assert "outside every class folder" in rejected["stray.png"]
    for path, reason in rejected.items():  # one stderr line each, as rejected.jsonl holds it
        assert f"rejected {path}: {reason}" in done.stderr.splitlines()
    assert packed(tmp_path / "out") == (("a",), {"a/0.jpg": 0})  # what ImageFolder lists: the same
