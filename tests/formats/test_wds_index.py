"""``dataio index``: existing WebDataset tars (written by webdataset.TarWriter) adopted in place."""

from __future__ import annotations

import io
import json
import pickle

import numpy as np
import pytest
import webdataset as wds
from PIL import Image

from dataio import ImageLoader
from dataio.cli import main
from dataio.formats.files import sha256_file
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.formats.dataset.verify import verify
from dataio.formats.images.wds_index import JOURNAL_DIR, IndexConfig, index_shards


class _Planted:
    """A pickle that creates a marker file if anything ever unpickles it."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _encoded(label: int, index: int, kind: str) -> bytes:
    colour = (label * 80 % 256, index * 37 % 256, 128)
    image = Image.new("RGB", (40 + index % 3 * 8, 32), colour)
    out = io.BytesIO()
    image.save(out, kind)
    return out.getvalue()


@pytest.fixture
def wds_tars(tmp_path):
    """Three tars as timm's imagenet-1k-wds: KEY.jpg + KEY.cls + KEY.json, plus hostile and broken samples."""
    folder = tmp_path / "tars"
    folder.mkdir()
    marker = tmp_path / "UNPICKLED"
    expected: list[tuple[str, int]] = []
    for shard in range(3):
        with wds.TarWriter(str(folder / f"imagenet-train-{shard:04d}.tar")) as sink:
            for index in range(5):
                key = f"n{shard}_{index:03d}"
                label = (shard * 5 + index) % 4
                kind = "png" if index == 4 else "jpeg"
                sample = {"__key__": key, "png" if kind == "png" else "jpg": _encoded(label, index, kind),
                          "cls": str(label).encode(), "json": json.dumps({"label": label}).encode(),
                          "pyd": pickle.dumps(_Planted(str(marker)))}
                sink.write(sample)
                expected.append((key, label))
            sink.write({"__key__": f"n{shard}_nolabel", "jpg": _encoded(0, 0, "jpeg")})
            sink.write({"__key__": f"n{shard}_broken", "jpg": b"\xff\xd8not a jpeg", "cls": b"1"})
    return folder, expected, marker


def test_index_adopts_tars_in_place_and_the_loader_reads_them(wds_tars, tmp_path):
    folder, expected, marker = wds_tars
    before = {t.name: sha256_file(t) for t in folder.glob("*.tar")}
    assert main(["index", str(folder), "--no-progress"]) == 0
    assert {t.name: sha256_file(t) for t in folder.glob("*.tar")} == before  # not rewritten
    _, manifest = read_manifest(folder)
    # 6 keys rejected, and each indexed key's planted .pyd named: a member no kind reads (issue 42)
    assert manifest.num_samples == 15 and manifest.num_rejected == 6 + 15 and manifest.classes == ("0", "1", "2", "3")
    assert all((folder / s.index).read_text().startswith("v1.2 7\n") for s in manifest.shards)
    rejected = [json.loads(line) for line in (folder / "rejected.jsonl").read_text().splitlines()]
    planted = [r for r in rejected if r["path"].endswith(".pyd")]
    assert {r["path"].split("/")[1] for r in rejected if r not in planted} == {
        f"n{s}_{k}" for s in range(3) for k in ("nolabel", "broken")}
    assert len(planted) == 15 and all(r["reason"].startswith("a member no kind reads") for r in planted)
    assert not (folder / JOURNAL_DIR).exists()
    report = verify(folder, deep=True)
    assert report.ok, report.problems
    table = read_sample_table(folder / manifest.sample_table)
    assert [(table.key(i), int(table.label[i])) for i in range(len(table))] == expected
    with ImageLoader(folder, batch_size=4, image_size=24, shuffle=False, drop_last=False, train=False) as loader:
        labels = [int(y) for _, batch in loader for y in batch]
    assert labels == [label for _, label in expected]
    assert not marker.exists()  # the .pyd members were never unpickled


def test_index_with_a_classes_file_rejects_labels_outside_it(wds_tars, tmp_path):
    folder, expected, _ = wds_tars
    classes = tmp_path / "classes.txt"
    classes.write_text("tench\ngoldfish\nshark\n")  # label 3 is outside
    summary = index_shards(IndexConfig(shards=(folder,), classes_file=classes, progress=False))
    assert summary.num_samples == sum(label < 3 for _, label in expected)
    assert read_manifest(folder)[1].classes == ("tench", "goldfish", "shark")
    assert verify(folder).ok


def test_index_resumes_from_its_journal_and_refuses_to_index_twice(wds_tars, monkeypatch):
    folder, _, _ = wds_tars
    import dataio.formats.images.wds_index as module

    calls: list[str] = []
    real = module._index_tar

    def dying(path, *how):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(path.name)
        return real(path, *how)

    monkeypatch.setattr(module, "_index_tar", dying)
    with pytest.raises(KeyboardInterrupt):
        index_shards(IndexConfig(shards=(folder,), progress=False, num_workers=1))
    assert not (folder / "manifest.json").exists() and len(list((folder / JOURNAL_DIR).glob("*.json"))) == 2
    monkeypatch.setattr(module, "_index_tar", lambda path, *how: calls.append(path.name) or real(path, *how))
    index_shards(IndexConfig(shards=(folder,), progress=False, num_workers=1))
    assert calls == ["imagenet-train-0000.tar", "imagenet-train-0001.tar", "imagenet-train-0002.tar"]
    assert verify(folder).ok
    assert main(["index", str(folder), "--no-progress"]) == 2  # a manifest is there: --overwrite


def test_index_names_bad_arguments_in_one_line(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    assert main(["index", str(tmp_path / "a")]) == 2
    assert "no .tar files" in capsys.readouterr().err
    (tmp_path / "x.txt").write_text("x")
    assert main(["index", str(tmp_path / "x.txt")]) == 2
    assert "not a .tar file" in capsys.readouterr().err


def test_a_tar_changed_after_indexing_is_named_by_the_loader(wds_tars):
    folder, _, _ = wds_tars
    index_shards(IndexConfig(shards=(folder,), progress=False))
    tar = sorted(folder.glob("*.tar"))[1]
    tar.write_bytes(tar.read_bytes()[:-1024])
    with pytest.raises(Exception, match=tar.name):
        ImageLoader(folder, batch_size=4, image_size=24)
    assert not verify(folder).ok


def test_the_loader_output_matches_a_conversion_of_the_same_images(wds_tars, tmp_path):
    """Adopted tars and `convert images --restart-interval 0` of the same JPEGs give the same eval images."""
    folder, _, _ = wds_tars
    index_shards(IndexConfig(shards=(folder,), progress=False))
    _, manifest = read_manifest(folder)
    table = read_sample_table(folder / manifest.sample_table)
    src = tmp_path / "src"
    jpegs = [i for i in range(len(table)) if table.path(i).endswith(".jpg")]
    for i in jpegs:
        with open(folder / manifest.shards[int(table.shard[i])].file, "rb") as handle:
            handle.seek(int(table.offset[i]))
            data = handle.read(int(table.size[i]))
        target = src / f"c{int(table.label[i])}" / f"{i:03d}.jpg"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    out = tmp_path / "converted"
    assert main(["convert", "images", str(src), str(out), "--restart-interval", "0", "--no-progress",
                 "--workers", "1"]) == 0

    def images(shards) -> dict[str, np.ndarray]:
        rows = read_sample_table(shards / "samples.arrow")
        with ImageLoader(shards, batch_size=64, image_size=24, shuffle=False, train=False) as loader:
            (pixels, _), = list(loader)
        return {rows.path(k): pixels[k].numpy() for k in range(len(rows))}

    adopted, converted = images(folder), images(out)
    for i in jpegs:
        key = f"c{int(table.label[i])}/{i:03d}.jpg"
        assert np.array_equal(adopted[table.path(i)], converted[key]), key


def test_a_damaged_tar_is_one_line_naming_it_and_the_others_stay_journaled(wds_tars, capsys):
    folder, _, _ = wds_tars
    damaged = sorted(folder.glob("*.tar"))[2]
    damaged.write_bytes(b"\x00garbage" * 100)
    assert main(["index", str(folder), "--no-progress", "--workers", "1"]) == 1
    err = capsys.readouterr().err
    assert damaged.name in err and "not a readable tar" in err and len(err.strip().splitlines()) == 1
    assert not (folder / "manifest.json").exists()
    assert len(list((folder / JOURNAL_DIR).glob("*.json"))) == 2  # the readable ones resume
