"""The benchmarks check the data they are given before anything runs or is written, and never write into a source
folder (issue 42): ``dataio bench detection`` given shards of another kind or of another annotation file (and
``bench images``, ``bench text`` shards of another kind), ``dataio bench pairs`` given a folder of other tars or a
user's tars without a manifest."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from dataio.formats.pairs.synthetic_pair_writers import write_img2dataset
from dataio.formats.pairs.synthetic_pairs import SyntheticPairsConfig
from tests.test_cli_bench_demo import _run


def listing(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` and its size."""
    return {str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*"))}


def _one_line_exit_2(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, (done.returncode, done.stderr)
    return lines[0]


def test_bench_detection_on_pair_shards_is_one_line_and_writes_nothing(coco_folder, pair_tars, tmp_path):
    """Before: ``KeyError: 'Field "image_id" does not exist'``, a 21-line traceback."""
    before = listing(pair_tars)
    done = _run("bench", "detection", str(coco_folder[0]), str(coco_folder[1]), "--shards", str(pair_tars),
                "--out", str(tmp_path / "out"), "--workers", "1", "--epochs", "1", "--warmup", "0", timeout=120)
    line = _one_line_exit_2(done)
    assert f"--shards {pair_tars} holds image-text pairs, not images with box targets: give a `dataio convert coco` " \
           f"of {coco_folder[1].name}, or leave --shards out" in line, line
    assert not (tmp_path / "out").exists() and listing(pair_tars) == before


def test_bench_images_and_text_on_shards_of_another_kind_are_one_line(image_folder, pair_tars, tmp_path):
    """The other benchmarks that take --shards check its kind too (they failed as deep in their first loader)."""
    (tmp_path / "corpus.txt").write_text("a line of text\n" * 4)
    for command, want in ((["images", str(image_folder[0])], "images with classes"),
                          (["text", str(tmp_path / "corpus.txt")], "token documents")):
        done = _run("bench", *command, "--shards", str(pair_tars), "--out", str(tmp_path / "out"), "--epochs", "1",
                    timeout=120)
        line = _one_line_exit_2(done)
        assert f"--shards {pair_tars} holds image-text pairs, not {want}" in line, line
        assert not (tmp_path / "out").exists()


def test_bench_detection_on_the_shards_of_another_annotation_file_is_one_line(coco_folder, coco_shards, tmp_path):
    """Before: ``KeyError: 101`` (an image id the other JSON lacks), a traceback after the conversion's checks."""
    other = json.loads(coco_folder[1].read_text())
    for image in other["images"]:
        image["id"] += 100
    for annotation in other["annotations"]:
        annotation["image_id"] += 100
    (tmp_path / "other.json").write_text(json.dumps(other))
    before = listing(coco_shards)
    done = _run("bench", "detection", str(coco_folder[0]), str(tmp_path / "other.json"), "--shards", str(coco_shards),
                "--out", str(tmp_path / "out"), "--workers", "1", "--epochs", "1", "--warmup", "0", timeout=120)
    line = _one_line_exit_2(done)
    assert f"--shards {coco_shards} was packed from {coco_folder[1].name!r}" in line, line
    assert f"not from {tmp_path / 'other.json'}" in line, line
    assert not (tmp_path / "out").exists() and listing(coco_shards) == before


def _classification_tar(path: Path) -> None:
    with tarfile.open(path, "w") as tar:
        for name, data in (("a.jpg", b"\xff\xd8\xff\xd9"), ("a.cls", b"3")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_bench_pairs_refuses_other_tars_and_a_full_folder_writing_nothing_into_them(tmp_path):
    """Before: a folder of class tars was indexed in place (manifest, .idx files, journal) and then refused."""
    tars = tmp_path / "class-tars"
    tars.mkdir()
    _classification_tar(tars / "shard-0.tar")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.md").write_text("mine")
    for folder, words in ((tars, "its tars hold no captions (KEY.txt; members: cls, jpg)"),
                          (notes, "holds no tar and is not empty")):
        before = listing(folder)
        done = _run("bench", "pairs", str(folder), "--out", str(tmp_path / "out"), "--workers", "1", "--epochs", "1",
                    "--warmup", "0", timeout=120)
        assert words in _one_line_exit_2(done), done.stderr
        assert listing(folder) == before and not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["class-tars", "notes"]  # nothing beside them either


def test_bench_pairs_indexes_a_users_tars_beside_them_not_among_them(tmp_path):
    src = tmp_path / "laion"
    write_img2dataset(src, SyntheticPairsConfig(count=16, photo_class="tiny", samples_per_shard=8))
    before = listing(src)
    done = _run("bench", "pairs", str(src), "--out", str(tmp_path / "out"), "--batch-size", "4", "--image-size", "32",
                "--workers", "1", "--epochs", "1", "--warmup", "0", "--vocab-size", "300", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert listing(src) == before  # the user's folder as it was
    assert (tmp_path / "laion-indexed" / "manifest.json").is_file()
    assert json.loads((tmp_path / "out" / "pairs.json").read_text())["num_pairs"] == 16
