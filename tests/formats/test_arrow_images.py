"""``convert images --format arrow``: Arrow IPC streams in the HF image layout, read by pyarrow and dataio alike."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pytest
import torch

from dataio import ImageLoader
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.formats.dataset.verify import verify
from tests.formats.journal_stop import Interrupted, interrupt_after


def _convert(src, out, **options):
    return convert_images(ConvertImagesConfig(src=src, out=out, num_workers=1, progress=False,
                                              max_shard_samples=8, **options))


@pytest.fixture(scope="module")
def both_formats(image_folder, tmp_path_factory):
    root = tmp_path_factory.mktemp("arrow")
    _convert(image_folder[0], root / "wds")
    _convert(image_folder[0], root / "arrow", format="arrow")
    return root / "wds", root / "arrow"


def _rows(folder):
    _, manifest = read_manifest(folder)
    for shard in manifest.shards:
        with pa.memory_map(str(folder / shard.file)) as source:
            yield from pa.ipc.open_stream(source).read_all().to_pylist()


def test_plain_pyarrow_reads_the_hf_layout_with_the_same_images(both_formats):
    wds_folder, arrow_folder = both_formats
    _, manifest = read_manifest(arrow_folder)
    assert all(s.file.endswith(".arrow") and not s.index for s in manifest.shards)
    first = pa.ipc.open_stream(pa.memory_map(str(arrow_folder / manifest.shards[0].file))).schema
    assert first.field("image").type == pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    features = json.loads(first.metadata[b"huggingface"])["info"]["features"]
    assert features["image"] == {"_type": "Image"} and features["label"]["names"] == list(manifest.classes)
    rows = list(_rows(arrow_folder))
    table = read_sample_table(wds_folder / "samples.arrow")
    wds_files = read_manifest(wds_folder)[1].shards
    assert len(rows) == len(table) == manifest.num_samples
    for i, row in enumerate(rows):
        with open(wds_folder / wds_files[int(table.shard[i])].file, "rb") as handle:
            handle.seek(int(table.offset[i]))
            assert row["image"]["bytes"] == handle.read(int(table.size[i]))  # the same packed JPEG
        assert row["label"] == int(table.label[i]) and row["image"]["path"] == table.path(i)
        assert row["key"] == table.key(i)


def test_the_loader_gives_the_same_batches_from_either_format(both_formats):
    wds_folder, arrow_folder = both_formats
    for options in ({"train": True, "seed": 3}, {"train": False}):
        with ImageLoader(wds_folder, batch_size=8, image_size=32, **options) as a, \
                ImageLoader(arrow_folder, batch_size=8, image_size=32, **options) as b:
            for (x, y), (u, v) in zip(a, b, strict=True):
                assert torch.equal(x, u) and torch.equal(y, v)


def test_verify_deep_passes_and_a_flipped_image_byte_is_named(both_formats, tmp_path):
    _, arrow_folder = both_formats
    assert verify(arrow_folder, deep=True).ok
    copy = tmp_path / "copy"
    shutil.copytree(arrow_folder, copy)
    table = read_sample_table(copy / "samples.arrow")
    shard = copy / read_manifest(copy)[1].shards[int(table.shard[2])].file
    data = bytearray(shard.read_bytes())
    data[int(table.offset[2]) + int(table.size[2]) // 2] ^= 0x10
    shard.write_bytes(bytes(data))
    problems = verify(copy, deep=True).problems
    assert any(table.key(2) in p and "checksum mismatch" in p for p in problems)
    with ImageLoader(copy, batch_size=8, image_size=32, on_error="skip") as loader:
        list(loader)
        assert [e["key"] for e in loader.stats.errors] == [table.key(2)]


def test_an_interrupted_arrow_conversion_resumes_byte_identical(image_folder, both_formats, tmp_path, monkeypatch):
    _, reference = both_formats
    interrupt_after(monkeypatch, 2)
    with pytest.raises(Interrupted):
        _convert(image_folder[0], tmp_path / "out", format="arrow")
    monkeypatch.undo()
    assert not (tmp_path / "out" / "manifest.json").exists()
    _convert(image_folder[0], tmp_path / "out", format="arrow")
    files = lambda folder: {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}  # noqa: E731
    assert files(tmp_path / "out") == files(reference)


def test_hf_datasets_reads_a_shard(both_formats):
    import datasets  # lazy: a test dependency (the test extra), heavy to import
    _, arrow_folder = both_formats
    _, manifest = read_manifest(arrow_folder)
    dataset = datasets.Dataset.from_file(str(arrow_folder / manifest.shards[0].file))
    assert dataset.features["label"].names == list(manifest.classes)
    assert len(dataset) == manifest.shards[0].num_samples
    assert dataset.with_format("arrow")[0]["image"].to_pylist()[0]["bytes"][:2] == b"\xff\xd8"
