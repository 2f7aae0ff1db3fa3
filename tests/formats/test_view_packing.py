"""``dataio convert images --kind views``: every image of a folder (flat or nested: folders are not classes) or of a
Parquet image column, packed without labels; the manifest declares the kind and the image field alone; killed at
any point, a rerun is byte-identical, as the other kinds' conversions."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from dataio.cli import main
from dataio.formats.dataset.convert_journal import JOURNAL_DIR
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.formats.dataset.verify import verify
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.kinds import KINDS
from dataio.formats.views.view_fields import declared_view_fields
from tests.formats.journal_stop import Interrupted, interrupt_after
from tests.formats.test_convert_resume import files_of, run_until_killed

ROOT = Path(__file__).resolve().parents[2]


def picture(path: Path, colour: tuple[int, int, int], size: tuple[int, int] = (40, 30)) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)
    return path.read_bytes()


def table_of(out: Path):
    manifest = read_manifest(out)[1]
    return manifest, read_sample_table(out / manifest.sample_table, declared=manifest.table_columns())


def check_views_folder(out: Path, paths: list[str]) -> None:
    """A views folder: its kind and image field declared, no classes, no label column, each image's path kept."""
    manifest, table = table_of(out)
    assert manifest.sample_kind == "views" and manifest.declared_kind() == "views"
    assert manifest.fields == declared_view_fields(manifest.options) == KINDS["views"].part("fields")(manifest.options)
    assert [(f.name, f.kind) for f in manifest.fields] == [("image", "image")]
    assert manifest.classes == () and table.label is None and "label" not in table.table.schema.names
    assert table.table.column("path").to_pylist() == paths
    report = verify(out, deep=True)
    assert report.ok and report.samples_checked == len(paths), report.problems


def test_a_flat_folder_packs_every_image_without_labels(tmp_path):
    src = tmp_path / "src"
    for i, name in enumerate(("b.jpg", "a.png", "c.jpeg")):
        picture(src / name, (40 * i, 90, 160))
    (src / "notes.txt").write_text("not an image")
    summary = convert_images(ConvertImagesConfig(src=src, out=tmp_path / "out", kind="views", num_workers=1,
                                                 progress=False))
    assert summary.line().startswith("packed 3 images into 1 shards")
    check_views_folder(tmp_path / "out", ["a.png", "b.jpg", "c.jpeg"])
    with tarfile.open(tmp_path / "out" / "shard-000000.tar") as tar:  # image and .json members, no .cls
        assert [name.split(".", 1)[1] for name in tar.getnames()] == ["jpg", "json"] * 3


def test_a_nested_folder_packs_every_image_and_its_folders_are_not_classes(tmp_path):
    src = tmp_path / "src"
    for i, name in enumerate(("top.jpg", "cats/a.jpg", "cats/deeper/b.jpg", "dogs/c.png", ".hidden/d.jpg")):
        picture(src / name, (20 * i, 60, 200))
    assert main(["convert", "images", str(src), str(tmp_path / "out"), "--kind", "views", "--workers", "2",
                 "--no-progress"]) == 0
    check_views_folder(tmp_path / "out", ["top.jpg", "cats/a.jpg", "cats/deeper/b.jpg", "dogs/c.png"])
    # the same tree as classes: two class folders, the image at the top listed as outside them
    convert_images(ConvertImagesConfig(src=src, out=tmp_path / "classes", num_workers=1, progress=False))
    manifest, table = table_of(tmp_path / "classes")
    assert manifest.sample_kind == "classification" and manifest.classes == ("cats", "dogs") and len(table) == 3


def test_a_parquet_source_gives_its_image_column_only(tmp_path):
    rows = [{"picture": {"bytes": picture(tmp_path / f"p{i}.jpg", (30 * i, 30, 30)), "path": f"p{i}.jpg"},
             "label": i % 2, "caption": f"caption {i}"} for i in range(5)]
    rows[3]["picture"] = {"bytes": None, "path": None}
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "data.parquet", row_group_size=2)
    alone = pa.table({"picture": pa.array([rows[0]["picture"]["bytes"], b"not an image"], pa.binary())})
    pq.write_table(alone, tmp_path / "alone.parquet")  # images alone: no label, no caption column
    out = tmp_path / "out"
    summary = convert_images(ConvertImagesConfig(src=tmp_path / "data.parquet", out=out, kind="views",
                                                 image_column="picture", num_workers=2, progress=False))
    assert (summary.num_samples, summary.num_rejected) == (4, 1)
    check_views_folder(out, ["p0.jpg", "p1.jpg", "p2.jpg", "p4.jpg"])
    assert "data.parquet#3" in (out / "rejected.jsonl").read_text()
    summary = convert_images(ConvertImagesConfig(src=tmp_path / "alone.parquet", out=tmp_path / "alone",
                                                 kind="views", image_column="picture", num_workers=1, progress=False))
    assert (summary.num_samples, summary.num_rejected) == (1, 1)
    check_views_folder(tmp_path / "alone", ["alone.parquet#0"])


def test_views_refuse_the_options_of_other_kinds(tmp_path):
    for options, message in (({"classes_file": tmp_path / "c.txt"}, "classes_file is for classes"),
                             ({"format": "arrow"}, "views are packed as WebDataset tars"),
                             ({"captions": True}, r"captions=True \(--captions\) packs image-text pairs, not 'views'")):
        with pytest.raises(ValueError, match=message):
            ConvertImagesConfig(src=tmp_path, out=tmp_path / "out", kind="views", **options)
    with pytest.raises(ValueError, match="packed by `dataio convert coco`"):
        ConvertImagesConfig(src=tmp_path, out=tmp_path / "out", kind="detection")


def views_command(src: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "dataio", "convert", "images", str(src), str(out), "--kind", "views",
            "--workers", "2", "--max-shard-samples", "2", "--no-progress"]


def test_views_sigkill_at_random_points_then_rerun_is_byte_identical(image_folder, tmp_path):
    reference = tmp_path / "reference"
    subprocess.run(views_command(image_folder[0], reference), check=True, capture_output=True, cwd=ROOT)
    assert read_manifest(reference)[1].sample_kind == "views"
    out = tmp_path / "out"
    rng = random.Random(os.getpid())
    kills = sum(run_until_killed(image_folder[0], out, records, rng.uniform(0, 0.02), views_command)
                for records in (2, 7, 13))
    assert kills >= 2, "the conversion outran the kills; make it longer"
    done = subprocess.run(views_command(image_folder[0], out), capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert files_of(out) == files_of(reference)
    assert not (out / JOURNAL_DIR).exists() and not list(out.glob(".*"))


def test_views_resume_after_an_interruption_at_each_shard_is_byte_identical(image_folder, tmp_path, monkeypatch):
    def config(out: Path) -> ConvertImagesConfig:
        return ConvertImagesConfig(src=image_folder[0], out=out, kind="views", max_shard_samples=5, num_workers=2,
                                   progress=False)

    reference = files_of(convert_images(config(tmp_path / "reference")).out)
    out = tmp_path / "out"
    for records in (1, 2, 2):  # interrupted after shards 1, 3 and 5, resumed from the journal each time
        interrupt_after(monkeypatch, records)
        with pytest.raises(Interrupted):
            convert_images(config(out))
        monkeypatch.undo()
    convert_images(config(out))
    assert files_of(out) == reference


def test_two_ranks_merge_to_the_views_folder_of_one_process(image_folder, tmp_path):
    one = convert_images(ConvertImagesConfig(src=image_folder[0], out=tmp_path / "one", kind="views",
                                             max_shard_samples=4, num_workers=1, progress=False)).out
    for rank in (1, 0):
        convert_images(ConvertImagesConfig(src=image_folder[0], out=tmp_path / "ranks", kind="views",
                                           max_shard_samples=4, num_workers=1, progress=False, rank=rank,
                                           world_size=2))
    merged, table = table_of(tmp_path / "ranks")
    assert merged.sample_kind == "views" and merged.fields == read_manifest(one)[1].fields
    assert table.table.column("path").to_pylist() == table_of(one)[1].table.column("path").to_pylist()
    assert verify(tmp_path / "ranks", deep=True).ok


def test_kind_pairs_is_what_captions_asks(tmp_path):
    src = tmp_path / "src"
    for i in range(3):
        picture(src / f"{i}.jpg", (60 * i, 20, 20))
        (src / f"{i}.txt").write_text(f"a picture numbered {i}")
    assert main(["convert", "images", str(src), str(tmp_path / "kind"), "--kind", "pairs", "--no-progress",
                 "--workers", "1"]) == 0
    assert main(["convert", "images", str(src), str(tmp_path / "flag"), "--captions", "--no-progress",
                 "--workers", "1"]) == 0
    assert files_of(tmp_path / "kind") == files_of(tmp_path / "flag")
    manifest, table = table_of(tmp_path / "kind")
    assert manifest.sample_kind == "pairs" and table.label is None
    assert table.table.column("caption").to_pylist() == [f"a picture numbered {i}" for i in range(3)]
    shutil.rmtree(tmp_path / "flag")
    assert main(["convert", "images", str(src), str(tmp_path / "flag"), "--kind", "views", "--captions",
                 "--no-progress"]) == 2
