"""``dataio convert images`` from Parquet files in the Hugging Face image layout (as ImageNet-1k on the Hub)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from dataio import ImageLoader
from dataio.cli import main
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.formats.images.synthetic import PHOTO_CLASSES, jpeg_bytes, textured_photo
from dataio.formats.dataset.verify import verify
from tests.formats.journal_stop import Interrupted, interrupt_after

CLASSES = ["tench", "goldfish", "great white shark"]


def _jpeg(label: int, index: int, mode: str = "RGB", kind: str = "JPEG") -> bytes:
    image = Image.new("RGB", (48 + index % 4 * 8, 40), (label * 90, index * 20 % 256, 60)).convert(mode)
    out = io.BytesIO()
    image.save(out, kind)
    return out.getvalue()


def _write(path, rows, *, features=True, image_column="image", label_column="label", plain_binary=False):
    """A Parquet file as HF `datasets` writes an image dataset: image struct<bytes, path>, int64 label."""
    image_type = pa.binary() if plain_binary else pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema([(image_column, image_type), (label_column, pa.int64())])
    if features:
        meta = {"info": {"features": {image_column: {"_type": "Image"},
                                      label_column: {"_type": "ClassLabel", "names": CLASSES}}}}
        schema = schema.with_metadata({"huggingface": json.dumps(meta)})
    images = [r[0] if plain_binary or r[0] is None else {"bytes": r[0], "path": r[2]} for r in rows]
    table = pa.table({image_column: pa.array(images, image_type), label_column: pa.array([r[1] for r in rows])},
                     schema=schema)
    pq.write_table(table, path, row_group_size=4)


def hub_repo_files(data: Path, cmyk: bool = True) -> list:
    """Two files of the Hub's shape in ``data`` (``train-0000{0,1}-of-00002.parquet``), with the quirks of real
    data (a CMYK JPEG unless not ``cmyk``, a PNG named .JPEG) and a few bad rows; the rows written."""
    data.mkdir(parents=True)
    first = [(_jpeg(i % 3, i), i % 3, f"img{i}.JPEG") for i in range(9)]
    if cmyk:
        first[2] = (_jpeg(1, 2, "CMYK"), 1, "cmyk.JPEG")  # converted, not dropped
    first[5] = (_jpeg(2, 5, kind="PNG"), 2, "png-named.JPEG")
    second = [(_jpeg(i % 3, i), i % 3, f"img{9 + i}.JPEG") for i in range(7)]
    second[1] = (b"\xff\xd8 not an image", 0, "broken.JPEG")
    second[3] = (None, 1, "none")
    second[4] = (_jpeg(0, 4), 7, "label-out-of-range.JPEG")
    _write(data / "train-00000-of-00002.parquet", first)
    _write(data / "train-00001-of-00002.parquet", second)
    return first + second


@pytest.fixture
def hub_files(tmp_path):
    """Two files of the Hub's shape, with the quirks of real data and a few bad rows."""
    return tmp_path / "data", hub_repo_files(tmp_path / "data")


def test_hub_parquet_converts_with_class_names_quirks_and_rejections(hub_files, tmp_path):
    data, rows = hub_files
    out = tmp_path / "out"
    assert main(["convert", "images", str(data), str(out), "--no-progress", "--workers", "2",
                 "--max-shard-samples", "5"]) == 0
    _, manifest = read_manifest(out)
    assert manifest.classes == tuple(CLASSES) and manifest.num_samples == 13 and manifest.num_rejected == 3
    rejected = {json.loads(line)["path"]: json.loads(line)["reason"]
                for line in (out / "rejected.jsonl").read_text().splitlines()}
    assert set(rejected) == {"train-00001-of-00002.parquet#1", "train-00001-of-00002.parquet#3",
                             "train-00001-of-00002.parquet#4"}
    assert "label 7" in rejected["train-00001-of-00002.parquet#4"]
    table = read_sample_table(out / "samples.arrow")
    kept = [r for i, r in enumerate(rows) if i not in (10, 12, 13)]
    assert [int(label) for label in table.label] == [r[1] for r in kept]
    assert [table.path(i) for i in range(len(table))] == [r[2] for r in kept]
    assert verify(out, deep=True).ok
    with ImageLoader(out, batch_size=13, image_size=32, train=False) as loader:
        (images, labels), = list(loader)
    assert labels.tolist() == [r[1] for r in kept] and images.shape == (13, 3, 32, 32)


def test_column_names_plain_binary_and_a_classes_file(tmp_path):
    path = tmp_path / "mine.parquet"
    _write(path, [(_jpeg(i % 2, i), i % 2, "") for i in range(6)], features=False, image_column="jpg",
           label_column="cls", plain_binary=True)
    classes = tmp_path / "classes.txt"
    classes.write_text("cat\ndog\n")
    out = tmp_path / "out"
    assert main(["convert", "images", str(path), str(out), "--image-column", "jpg", "--label-column", "cls",
                 "--classes", str(classes), "--no-progress", "--workers", "1"]) == 0
    assert read_manifest(out)[1].classes == ("cat", "dog")
    assert main(["convert", "images", str(path), str(tmp_path / "o2"), "--no-progress"]) == 2  # no 'image' column


def test_an_interrupted_parquet_conversion_resumes_byte_identical(hub_files, tmp_path, monkeypatch):
    data, _ = hub_files

    def run(out):
        return convert_images(ConvertImagesConfig(src=data, out=out, num_workers=1, progress=False,
                                                  max_shard_samples=3))

    run(tmp_path / "reference")
    interrupt_after(monkeypatch, 2)
    with pytest.raises(Interrupted):
        run(tmp_path / "out")
    monkeypatch.undo()
    run(tmp_path / "out")
    files = lambda f: {p.name: p.read_bytes() for p in f.iterdir() if p.is_file()}  # noqa: E731
    assert files(tmp_path / "out") == files(tmp_path / "reference")


def test_rank_conversion_of_parquet_matches_one_process(hub_files, tmp_path):
    data, _ = hub_files
    one = tmp_path / "one"
    convert_images(ConvertImagesConfig(src=data, out=one, num_workers=1, progress=False))
    for rank in range(2):
        convert_images(ConvertImagesConfig(src=data, out=tmp_path / "two", num_workers=1, progress=False,
                                           rank=rank, world_size=2))
    a, b = read_sample_table(one / "samples.arrow"), read_sample_table(tmp_path / "two" / "samples.arrow")
    assert np.array_equal(a.checksum, b.checksum) and np.array_equal(a.label, b.label)
    counts = [read_manifest(tmp_path / "two" / f"rank-0000{r}-of-00002")[1].num_samples for r in range(2)]
    assert min(counts) >= 5, counts  # split by rows: no rank idles


def test_streaming_from_any_row_gives_the_rows_from_there(hub_files):
    """Resume reads from a row in the middle of a file and of a row group (groups of 4 rows here)."""
    from dataio.formats.images.parquet_images import parquet_files, scan_parquet_images

    source = scan_parquet_images(parquet_files(hub_files[0]))
    everything = [(r.id, r.path, r.label) for r in source.stream(0)]
    assert [row_id for row_id, _ in source.rows] == [row_id for row_id, _, _ in everything]
    for start in range(len(everything) + 1):
        assert [(r.id, r.path, r.label) for r in source.stream(start)] == everything[start:]
    assert len(source.row_sizes()) == len(everything) and source.row_sizes().min() > 0


def test_a_folder_with_several_splits_is_refused_naming_them(hub_files, tmp_path, capsys):
    data, rows = hub_files
    _write(data / "validation-00000-of-00001.parquet", rows[:3])
    assert main(["convert", "images", str(data), str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "splits train, validation" in err and "Traceback" not in err
    assert main(["convert", "images", str(data / "train-*.parquet"), str(tmp_path / "out"), "--no-progress",
                 "--workers", "1"]) == 0


def _tree(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def real_parquet(real_photos, tmp_path_factory):
    """``real_photos`` (ImageNet-size ~110 KB and camera 2-4 MB) and a ~5 MB camera photo, in two Parquet files
    of the Hub's layout written by pyarrow (row groups of 4)."""
    photos = sorted(real_photos.rglob("*.JPEG"))
    rows = [(p.read_bytes(), sorted(real_photos.iterdir()).index(p.parent), p.name) for p in photos]
    big = jpeg_bytes(textured_photo(1, np.random.default_rng(5), PHOTO_CLASSES["camera"]), quality=97)
    rows.insert(3, (big, 1, "big.JPEG"))
    data = tmp_path_factory.mktemp("real_parquet") / "data"
    data.mkdir()
    _write(data / "train-00000-of-00002.parquet", rows[:8])
    _write(data / "train-00001-of-00002.parquet", rows[8:])
    return data, rows


def test_real_size_photos_from_parquet_convert_with_any_worker_count(real_parquet, tmp_path):
    """Issue 23 case 1: with 2 workers or more, a Parquet of ~110 KB photos hung for ever (the parent blocked
    sending image bytes while every worker blocked sending its results). Now the same output as 1 worker."""
    data, rows = real_parquet
    sizes = sorted(len(r[0]) for r in rows)
    assert sizes[0] < 150_000 and sizes[-2] > 2_000_000 and sizes[-1] > 4_500_000
    convert_images(ConvertImagesConfig(src=data, out=tmp_path / "workers-1", num_workers=1, max_shard_samples=4,
                                       progress=False))
    outputs = {1: _tree(tmp_path / "workers-1")}
    for workers in (2, 4):  # as the CLI, in a subprocess under a timeout
        out = tmp_path / f"workers-{workers}"
        result = subprocess.run([sys.executable, "-m", "dataio", "convert", "images", str(data), str(out),
                                 "--workers", str(workers), "--max-shard-samples", "4", "--no-progress"],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0 and result.stderr == "", result.stderr
        assert read_manifest(out)[1].num_samples == len(rows)
        outputs[workers] = _tree(out)
    assert outputs[2] == outputs[1] and outputs[4] == outputs[1]


def test_path_only_rows_written_by_hf_datasets_are_read_from_their_files(real_photos, tmp_path, monkeypatch):
    """``Dataset.cast_column("image", Image())`` over file paths, then ``to_parquet``: rows of a path and no
    bytes (``to_parquet`` needs the paths to exist from the current folder). Read from an absolute path, from
    the Parquet file's folder, or from the current folder (where ``datasets`` opens it); a path that names no
    file is rejected as FILE#ROW with the reason."""
    import datasets  # lazy: a test dependency, heavy to import

    photos = sorted(real_photos.rglob("*.JPEG"))[:3]
    (tmp_path / "images").mkdir()
    for photo in photos:
        (tmp_path / "images" / photo.name).write_bytes(photo.read_bytes())
    data = tmp_path / "data"
    data.mkdir()
    paths = [str(tmp_path / "images" / photos[0].name),  # absolute
             f"../images/{photos[1].name}"]  # relative to the Parquet file's folder, written from there
    monkeypatch.chdir(data)
    dataset = datasets.Dataset.from_dict({"image": paths, "label": [0, 1]})
    dataset.cast_column("image", datasets.Image()).to_parquet(str(data / "a-hf.parquet"))
    written = pq.read_table(data / "a-hf.parquet").column("image").to_pylist()
    assert written == [{"bytes": None, "path": path} for path in paths]
    more = [f"images/{photos[2].name}", "images/gone.JPEG"]  # relative to the folder the conversion runs in
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    pq.write_table(pa.table({"image": pa.array([{"bytes": None, "path": p} for p in more], image_type),
                             "label": pa.array([0, 1])}), data / "b-pyarrow.parquet")
    result = subprocess.run([sys.executable, "-m", "dataio", "convert", "images", "data", "out",
                             "--workers", "2", "--no-progress"], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "rejected b-pyarrow.parquet#1: no image bytes in the row, and its path 'images/gone.JPEG' is not a file "
        "(absolute, or relative to the Parquet file's folder or the current folder)"]
    assert [json.loads(line)["path"] for line in (tmp_path / "out" / "rejected.jsonl").read_text().splitlines()] \
        == ["b-pyarrow.parquet#1"]
    _write(tmp_path / "embedded.parquet",
           [(p.read_bytes(), label, p.name) for p, label in zip(photos, [0, 1, 0], strict=True)])
    convert_images(ConvertImagesConfig(src=tmp_path / "embedded.parquet", out=tmp_path / "embedded", num_workers=1,
                                       progress=False))
    got, expected = read_sample_table(tmp_path / "out" / "samples.arrow"), read_sample_table(
        tmp_path / "embedded" / "samples.arrow")
    assert np.array_equal(got.checksum, expected.checksum) and np.array_equal(got.label, expected.label)
    assert [got.path(i) for i in range(len(got))] == paths + more[:1]
