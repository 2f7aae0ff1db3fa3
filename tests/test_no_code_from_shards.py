"""Nothing from a shard ever runs: pickles planted as ``KEY.pyd``, ``KEY.pickle`` and ``KEY.pth`` members next to
real samples (the shards stay whole and consistent with the manifest, DALI indexes and sample table), and a pickled
extension type in the sample table, read by every command and loader. Unpickling any of them creates a marker file.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import pickle
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image

from dataio import ImageLoader
from dataio.cli import main
from dataio.errors import DataioError
from dataio.formats.dataset import shard_members
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table, write_sample_table
from dataio.formats.dataset.wds_shards import ShardWriter

PLANTED = ("pyd", "pickle", "pth")
HAVE_DALI = importlib.util.find_spec("nvidia.dali") is not None


class _Planted:
    """Unpickling this opens (creates) ``marker``: proof that a reader unpickled a shard member."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (self.marker, "w")


def _samples_of(shard: Path) -> list[dict[str, bytes | str]]:
    """A shard's samples as webdataset sample dicts, members in file order."""
    samples: list[dict] = []
    with tarfile.open(shard, "r:") as tar:
        for member in tar:
            key, extension = member.name.split(".", 1)
            if not samples or samples[-1]["__key__"] != key:
                samples.append({"__key__": key})
            samples[-1][extension] = tar.extractfile(member).read()
    return samples


def _plant(folder: Path, payload: bytes) -> None:
    """Rewrite every shard with the planted members in each sample; the DALI indexes, the sample table's offsets
    and the manifest's sizes and sha256 follow, so the folder stays valid (``dataio verify`` passes)."""
    folder, manifest = read_manifest(folder)
    entries, offsets = [], {}
    for index, entry in enumerate(manifest.shards):
        writer = ShardWriter(folder, 1 << 40, first_index=index)
        for sample in _samples_of(folder / entry.file):
            writer.write({**sample, **{extension: payload for extension in PLANTED}})
        entries.append(writer.close())
        offsets.update({c.key: c.offset for components in writer.locations[0] for c in components
                        if c.extension == "jpg"})
    table = read_sample_table(folder / manifest.sample_table).table.to_pydict()
    table["offset"] = [offsets[key] for key in table["key"]]
    write_sample_table(folder / manifest.sample_table, table)
    dataclasses.replace(manifest, shards=tuple(entries)).write(folder)


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(source folder, planted shard folder, marker path): 2 classes x 5 images in 3 shards."""
    root = tmp_path_factory.mktemp("planted")
    src = root / "src"
    rng = np.random.default_rng(0)
    for i in range(10):
        folder = src / f"class{i % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)).save(folder / f"{i}.jpg")
    shards = root / "shards"
    convert_images(ConvertImagesConfig(src=src, out=shards, max_shard_samples=4, num_workers=1, progress=False))
    marker = root / "MARKER"
    _plant(shards, pickle.dumps(_Planted(str(marker))))
    with tarfile.open(shards / "shard-000000.tar") as tar:
        assert {m.name.split(".", 1)[1] for m in tar} == {"jpg", "cls", "json", *PLANTED}
    return src, shards, marker


@pytest.fixture(autouse=True)
def no_marker_before(request):
    """Each test starts without the marker (the control test removes the one it provokes)."""
    if "planted" in request.fixturenames:
        assert not request.getfixturevalue("planted")[2].exists()


def test_the_planted_members_run_under_webdataset_default_decoders(planted):
    """The control: webdataset's ``.decode("pil")``, which the bench baseline used, unpickles them."""
    import webdataset as wds  # lazy: only this control uses webdataset's decoders

    _, shards, marker = planted
    try:
        dataset = wds.WebDataset(str(shards / "shard-000000.tar"), shardshuffle=False, empty_check=False)
        with pytest.raises(wds.autodecode.DecodingError):  # the .pth is no torch file: it fails, after unpickling
            next(iter(dataset.decode("pil")))
        assert marker.exists()
    finally:
        marker.unlink(missing_ok=True)


def test_verify_and_verify_deep_read_planted_shards_without_running_them(planted):
    _, shards, marker = planted
    assert main(["verify", str(shards)]) == 0
    assert main(["verify", "--deep", str(shards)]) == 0
    assert not marker.exists()


def test_explicit_member_handlers_read_the_planted_shards(planted):
    """What the webdataset baseline of ``dataio bench images`` runs: only image and .cls members, decoded by
    ``shard_members``."""
    import webdataset as wds  # lazy: as the bench baseline imports it

    _, shards, marker = planted
    folder, manifest = read_manifest(shards)
    dataset = wds.WebDataset([str(folder / s.file) for s in manifest.shards], shardshuffle=False, empty_check=False,
                             select_files=shard_members.wanted_member).map(shard_members.decode_sample)
    decoded = list(dataset)
    assert all(image.mode == "RGB" and image.size == (48, 40) for image, _ in decoded)
    assert sorted(label for _, label in decoded) == [0] * 5 + [1] * 5
    assert not marker.exists()


def test_bench_images_over_planted_shards(planted, tmp_path):
    src, shards, marker = planted
    loaders = "standard,webdataset,dataio" + (",dali_cpu" if HAVE_DALI else "")
    assert main(["bench", "images", str(src), "--shards", str(shards), "--loaders", loaders, "--epochs", "1",
                 "--warmup", "0", "--batch-size", "4", "--image-size", "16", "--workers", "1",
                 "--out", str(tmp_path)]) == 0
    result = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert {row["loader"] for row in result["rows"]} == set(loaders.split(","))
    assert all(row["img_s"] > 0 for row in result["rows"])
    assert not marker.exists()


@pytest.mark.parametrize("decoder", ["turbo", "dali"] if HAVE_DALI else ["turbo"])
def test_image_loader_over_planted_shards(planted, decoder):
    _, shards, marker = planted
    with ImageLoader(shards, batch_size=4, image_size=16, num_workers=1, decoder=decoder) as loader:
        labels = sorted(int(label) for _, batch_labels in loader for label in batch_labels)
    assert labels == [0] * 5 + [1] * 5
    assert not marker.exists()


def test_train_over_planted_shards(planted, tmp_path):
    _, shards, marker = planted
    assert main(["train", "--train", str(shards), "--val", str(shards), "--epochs", "1", "--image-size", "32",
                 "--batch-size", "4", "--workers", "1", "--device", "cpu", "--out", str(tmp_path / "run")]) == 0
    assert not marker.exists()


def test_a_pickled_extension_type_in_the_sample_table_is_not_unpickled(planted, tmp_path):
    """pyarrow < 14.0.1 unpickled ``arrow.py_extension_type`` fields (CVE-2023-47248) when reading a file."""
    _, shards, marker = planted
    copy = tmp_path / "copy"
    shutil.copytree(shards, copy)
    folder, manifest = read_manifest(copy)
    table = read_sample_table(folder / manifest.sample_table).table
    evil = pa.field("evil", pa.binary(), metadata={b"ARROW:extension:name": b"arrow.py_extension_type",
                                                   b"ARROW:extension:metadata": pickle.dumps(_Planted(str(marker)))})
    table = table.append_column(evil, pa.array([b""] * len(table), pa.binary()))
    with pa.ipc.new_file(folder / manifest.sample_table, table.schema) as writer:
        writer.write_table(table)
    assert main(["verify", str(copy)]) == 1  # an unexpected column, named
    with pytest.raises(DataioError, match="column .evil. is not one of"):
        ImageLoader(copy, batch_size=4, image_size=16)
    assert not marker.exists()


def test_a_shard_named_like_a_pipe_url_is_opened_as_a_file(planted, tmp_path, monkeypatch):
    """webdataset runs ``pipe:CMD`` names as shell commands; the bench hands it absolute paths only."""
    src, shards, _ = planted
    copy = tmp_path / "copy"
    shutil.copytree(shards, copy)
    folder, manifest = read_manifest(copy)
    evil = "pipe:touch PIPE-MARKER"
    (folder / manifest.shards[0].file).rename(folder / evil)
    entries = (dataclasses.replace(manifest.shards[0], file=evil),) + manifest.shards[1:]
    dataclasses.replace(manifest, shards=entries).write(folder)
    monkeypatch.chdir(copy)  # `--shards .`: the shard list is relative, "pipe:touch PIPE-MARKER" itself
    assert main(["bench", "images", str(src), "--shards", ".", "--loaders", "webdataset", "--epochs", "1",
                 "--warmup", "0", "--batch-size", "4", "--image-size", "16", "--workers", "1",
                 "--out", str(tmp_path / "results")]) == 0
    assert not (copy / "PIPE-MARKER").exists()
