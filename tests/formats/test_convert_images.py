"""dataio convert images: round trip, awkward files, determinism, options."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from dataio.errors import UsageError
from dataio.formats.errors import NothingConverted
from dataio.formats.images.image_convert import REJECTED_NAME, ConvertImagesConfig, convert_images
from dataio.formats.images.image_tree import scan_image_folder
from dataio.formats.images.image_prepare import ImagePrepareConfig
from dataio.formats.files import sha256_file
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.formats.dataset.wds_shards import dali_index_text, scan_tar


def _samples(folder: Path) -> dict[str, dict]:
    """path -> {"label", "jpg"} over every shard, read with plain tarfile."""
    _, manifest = read_manifest(folder)
    found: dict[str, dict] = {}
    for shard in manifest.shards:
        with tarfile.open(folder / shard.file) as tar:
            members = {m.name: tar.extractfile(m).read() for m in tar if m.isreg()}
        for name, data in members.items():
            if name.endswith(".json"):
                meta = json.loads(data)
                key = name[: -len(".json")]
                assert int(members[key + ".cls"]) == meta["label"]
                found[meta["path"]] = {"label": meta["label"], "jpg": members[key + ".jpg"]}
    return found


def test_round_trip_counts_labels_checksums(image_folder, image_shards):
    src, faulty = image_folder
    classes, files = scan_image_folder(src)
    folder, manifest = read_manifest(image_shards)
    assert list(manifest.classes) == sorted(p.name for p in src.iterdir() if p.is_dir())
    rejected = [json.loads(line) for line in (image_shards / REJECTED_NAME).read_text().splitlines()]
    assert {r["path"] for r in rejected} == {p for p, kind in faulty.items() if kind in ("truncated", "empty")}
    assert all(r["reason"] for r in rejected)
    assert manifest.num_samples == len(files) - len(rejected) == 36 + 4
    assert manifest.num_rejected == 2
    assert len(manifest.shards) > 1
    for shard in manifest.shards:
        assert sha256_file(folder / shard.file) == shard.sha256
        assert (folder / shard.file).stat().st_size == shard.bytes
    samples = _samples(image_shards)
    assert len(samples) == manifest.num_samples
    for path, label in files:
        if path in samples:
            assert samples[path]["label"] == label == classes.index(path.split("/")[0])
    assert not any(p.name.startswith(".") for p in image_shards.iterdir()), "partial files left behind"


def test_awkward_images_become_rgb_jpeg(image_folder, image_shards):
    _, faulty = image_folder
    samples = _samples(image_shards)
    for path, kind in faulty.items():
        if kind in ("cmyk", "grayscale", "png_named_jpeg", "exif_rotated"):
            image = Image.open(io.BytesIO(samples[path]["jpg"]))
            assert (image.format, image.mode) == ("JPEG", "RGB"), (path, kind)
        if kind == "not_image":
            assert path not in samples
    rotated = Image.open(io.BytesIO(samples[next(p for p, k in faulty.items() if k == "exif_rotated")]["jpg"]))
    original = Image.open(io.BytesIO(samples[next(p for p, k in faulty.items() if k == "cmyk")]["jpg"]))
    assert rotated.size == original.size[::-1], "EXIF orientation 6 must swap width and height"
    assert rotated.getexif().get(0x0112, 1) == 1


def test_clean_jpegs_are_kept_pixel_for_pixel(image_folder, image_shards):
    """Rewritten losslessly with restart markers (test_jpeg_splice.py), or byte for byte without the extension."""
    src, _ = image_folder
    samples = _samples(image_shards)
    path = next(p for p in samples if "_0000" in p)
    packed, original = samples[path]["jpg"], (src / path).read_bytes()
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(packed))),
                                  np.asarray(Image.open(io.BytesIO(original))))
    _, manifest = read_manifest(image_shards)
    if manifest.options["restart_interval"]:
        assert b"\xff\xdd" in packed[:packed.index(b"\xff\xda")], "no restart interval (DRI) before the scan"
    else:
        assert packed == original


def test_output_identical_across_worker_counts(image_folder, tmp_path):
    outputs = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        convert_images(ConvertImagesConfig(src=image_folder[0], out=out, shard_size="400KB", num_workers=workers,
                                           progress=False))
        outputs.append({p.name: p.read_bytes() for p in out.iterdir()})
    assert outputs[0] == outputs[1]


def test_index_files_match_dali_wds2idx(image_shards, tmp_path):
    wds2idx = pytest.importorskip("wds2idx", reason="DALI ships wds2idx on Linux x86_64 only")
    _, manifest = read_manifest(image_shards)
    shard = image_shards / manifest.shards[0].file
    reference = tmp_path / "ref.idx"
    with wds2idx.IndexCreator(str(shard), str(reference), verbose=False) as creator:
        creator.create_index()
    assert (image_shards / manifest.shards[0].index).read_text() == reference.read_text()
    assert dali_index_text(scan_tar(shard)) == reference.read_text()


def test_sample_table_points_at_the_images(image_shards):
    folder, manifest = read_manifest(image_shards)
    table = read_sample_table(folder / manifest.sample_table)
    assert len(table) == manifest.num_samples
    for i in (0, len(table) - 1):
        with open(folder / manifest.shards[table.shard[i]].file, "rb") as f:
            f.seek(table.offset[i])
            image = Image.open(io.BytesIO(f.read(table.size[i])))
            assert image.size == (table.width[i], table.height[i])


def test_max_side_and_quality_reencode(image_folder, tmp_path):
    out = tmp_path / "small"
    prepare = ImagePrepareConfig(max_side=128, quality=70)
    convert_images(ConvertImagesConfig(src=image_folder[0], out=out, prepare=prepare, num_workers=1, progress=False))
    for sample in _samples(out).values():
        assert max(Image.open(io.BytesIO(sample["jpg"])).size) == 128


def test_decompression_bomb_limit_rejects_with_reason(image_folder, tmp_path):
    out = tmp_path / "bombs"
    with pytest.raises(NothingConverted, match="all 42 files were rejected"):  # every file: the run fails
        convert_images(ConvertImagesConfig(src=image_folder[0], out=out, num_workers=1, progress=False,
                                           prepare=ImagePrepareConfig(max_pixels=10_000)))
    rejected = [json.loads(line) for line in (out / "rejected.jsonl").read_text().splitlines()]
    reasons = {r["path"]: r["reason"] for r in rejected}
    assert len(reasons) == 42  # 40 decodable images + truncated (header still valid) + empty
    assert sum("decompression bomb" in reason for reason in reasons.values()) == 41
    assert "pixels (limit 10000)" in next(iter(reasons.values()))


def test_bad_invocations(image_folder, image_shards, tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        convert_images(ConvertImagesConfig(src=tmp_path / "missing", out=tmp_path / "o", progress=False))
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.jpg").write_bytes(b"")
    with pytest.raises(UsageError, match="no class subfolders"):
        convert_images(ConvertImagesConfig(src=tmp_path / "flat", out=tmp_path / "o", progress=False))
    with pytest.raises(UsageError, match="not empty"):
        convert_images(ConvertImagesConfig(src=image_folder[0], out=image_shards, progress=False))
