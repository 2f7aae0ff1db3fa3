"""Generated image-text pairs: captions that say what is drawn, in the three layouts caption data comes in."""

from __future__ import annotations

import io
import json
import tarfile

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from dataio.formats.errors import ConfigError
from dataio.formats.pairs.synthetic_pair_writers import (META_SCHEMA, write_caption_folder, write_hub_parquet,
                                                          write_img2dataset)
from dataio.formats.pairs.synthetic_pairs import (BAD_PAIRS, COLOURS, HUGE_CAPTION_BYTES, SyntheticPairsConfig,
                                                   make_pair)

NAMES = list(COLOURS)
PALETTE = np.array([COLOURS[name] for name in NAMES], dtype=np.float64)


def colour_shares(data: bytes) -> dict[str, float]:
    """The share of the picture's pixels nearest to each named colour."""
    pixels = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=np.float64).reshape(-1, 3)
    nearest = np.argmin(((pixels[:, None, :] - PALETTE[None]) ** 2).sum(-1), axis=1)
    return dict(zip(NAMES, np.bincount(nearest, minlength=len(NAMES)) / len(nearest), strict=True))


def test_captions_name_the_colours_drawn():
    config = SyntheticPairsConfig(count=40)
    for index in range(config.count):
        pair = make_pair(index, config)
        shares = colour_shares(pair.image)
        named = {shape.colour for shape in pair.scene.shapes}
        assert max(shares, key=shares.get) == pair.scene.background, (pair.caption, shares)
        assert all(shares[colour] > 0.03 for colour in named), (pair.caption, shares)
        assert all(share < 0.05 for colour, share in shares.items() if colour not in named | {pair.scene.background})
        assert pair.scene.background in pair.caption and all(s.colour in pair.caption and s.kind in pair.caption
                                                             for s in pair.scene.shapes)


def test_fewer_colours_kinds_and_shapes_give_fewer_captions():
    config = SyntheticPairsConfig(count=60, colours=3, kinds=2, max_shapes=1)
    scenes = {make_pair(i, config).scene for i in range(config.count)}
    assert {s.background for s in scenes} <= set(NAMES[:3]) and all(len(s.shapes) == 1 for s in scenes)
    assert {s.shapes[0].kind for s in scenes} <= {"circle", "square"}
    assert all(s.shapes[0].colour != s.background for s in scenes)


@pytest.mark.parametrize("photo_class, low, high, mean", [("tiny", 1_000, 8_000, (1_500, 4_000)),
                                                          ("imagenet", 80_000, 160_000, (95_000, 130_000))])
def test_photo_classes_have_their_sizes(photo_class, low, high, mean):
    """``imagenet``: about ImageNet's mean of ~110 KB a photo."""
    config = SyntheticPairsConfig(photo_class=photo_class)
    sizes = [len(make_pair(i, config).image) for i in range(8)]
    assert all(low <= size <= high for size in sizes), sizes
    assert mean[0] < np.mean(sizes) < mean[1], sizes


def test_img2dataset_layout(tmp_path):
    config = SyntheticPairsConfig(count=25, samples_per_shard=10, failed_fraction=0.2, seed=3)
    written = write_img2dataset(tmp_path, config)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"0000{i}{suffix}" for i in range(3) for suffix in (".parquet", ".tar", "_stats.json")]
    assert len(written.failed) == 5 and len(written.captions) == 20 and not written.bad
    with tarfile.open(tmp_path / "00001.tar") as tar:
        names = tar.getnames()
        assert names[:3] == ["000010.jpg", "000010.json", "000010.txt"]  # img2dataset's keys, TarWriter's order
        members = {name: tar.extractfile(name).read() for name in names}
    table = pq.read_table(tmp_path / "00001.parquet")
    assert table.schema.remove_metadata() == META_SCHEMA and table.num_rows == 10
    rows = {row["key"]: row for row in table.to_pylist()}
    tar_keys = {name.split(".")[0] for name in names}
    assert tar_keys == {key for key, row in rows.items() if row["status"] == "success"} and len(tar_keys) < 10
    for key in tar_keys:
        meta = json.loads(members[f"{key}.json"])
        assert meta == rows[key] and meta["caption"] == members[f"{key}.txt"].decode() == written.captions[key]
        assert set(meta) == {"caption", "url", "key", "status", "error_message", "width", "height",
                             "original_width", "original_height", "exif", "sha256"}
        image = Image.open(io.BytesIO(members[f"{key}.jpg"]))
        assert (meta["width"], meta["height"]) == image.size and image.format == "JPEG"
    failed = [row for row in rows.values() if row["status"] != "success"]
    assert failed and all(row["error_message"] and row["width"] is None for row in failed)
    stats = json.loads((tmp_path / "00001_stats.json").read_text())
    assert stats["count"] == 10 and stats["successes"] == len(tar_keys)


def test_the_same_seed_writes_the_same_bytes(tmp_path):
    config = SyntheticPairsConfig(count=6, samples_per_shard=4)
    write_img2dataset(tmp_path / "a", config)
    write_img2dataset(tmp_path / "b", config)
    write_img2dataset(tmp_path / "c", SyntheticPairsConfig(count=6, samples_per_shard=4, seed=1))
    for name in ("00000.tar", "00001.tar", "00000.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
        assert (tmp_path / "a" / name).read_bytes() != (tmp_path / "c" / name).read_bytes()


def test_hub_parquet_reads_as_a_datasets_image_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    config = SyntheticPairsConfig(count=12, samples_per_shard=5)
    written = write_hub_parquet(tmp_path, config, caption_column="text")
    assert [f.name for f in written.files] == [f"train-0000{i}-of-00003.parquet" for i in range(3)]
    assert all(f.parent == tmp_path / "data" for f in written.files)
    dataset = datasets.Dataset.from_parquet([str(f) for f in written.files])
    assert isinstance(dataset.features["image"], datasets.Image) and dataset.features["text"].dtype == "string"
    assert [row["text"] for row in dataset] == [make_pair(i, config).caption for i in range(12)]
    assert dataset[7]["image"].size == make_pair(7, config).size
    assert written.captions["train-00001-of-00003.parquet:2"] == make_pair(7, config).caption


def test_caption_folder(tmp_path):
    written = write_caption_folder(tmp_path, SyntheticPairsConfig(count=5, image_format="png"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"0000000{i}{s}" for i in range(5) for s in (".png", ".txt"))
    for name, caption in written.captions.items():
        assert (tmp_path / f"{name}.txt").read_text() == caption
        assert Image.open(tmp_path / f"{name}.png").format == "PNG"


def _bad_members(tmp_path) -> dict[str, dict[str, bytes]]:
    written = write_img2dataset(tmp_path, SyntheticPairsConfig(count=20, bad_pairs=BAD_PAIRS))
    assert sorted(written.bad.values()) == sorted(BAD_PAIRS) and len(written.captions) == 20 - len(BAD_PAIRS)
    samples: dict[str, dict[str, bytes]] = {}
    with tarfile.open(tmp_path / "00000.tar") as tar:
        for member in tar.getmembers():
            key, ext = member.name.split(".", 1)
            samples.setdefault(written.bad.get(key, "good"), {})[ext] = tar.extractfile(member).read()
    return samples


def test_bad_pairs_in_img2dataset_tars(tmp_path):
    samples = _bad_members(tmp_path)
    with pytest.raises(UnicodeDecodeError):
        samples["caption_not_utf8"]["txt"].decode("utf-8")
    assert samples["empty_caption"]["txt"] == b""
    assert set(samples["missing_caption"]) == {"jpg", "json"} and set(samples["missing_image"]) == {"txt", "json"}
    assert len(samples["huge_caption"]["txt"]) == HUGE_CAPTION_BYTES
    with pytest.raises(json.JSONDecodeError):
        json.loads(samples["json_not_json"]["json"])
    with pytest.raises(OSError):
        Image.open(io.BytesIO(samples["truncated_image"]["jpg"])).load()
    Image.open(io.BytesIO(samples["good"]["jpg"])).load()


def test_bad_pairs_in_hub_parquet_and_folders(tmp_path):
    kinds = ("empty_caption", "missing_caption", "missing_image", "truncated_image")
    written = write_hub_parquet(tmp_path / "hub", SyntheticPairsConfig(count=10, bad_pairs=kinds))
    rows = pq.read_table(written.files[0]).to_pylist()
    by_kind = {kind: rows[int(key.split(":")[1])] for key, kind in written.bad.items()}
    assert by_kind["empty_caption"]["caption"] == "" and by_kind["missing_caption"]["caption"] is None
    assert by_kind["missing_image"]["image"] is None
    folder = write_caption_folder(tmp_path / "folder", SyntheticPairsConfig(count=10, bad_pairs=("caption_not_utf8",
                                                                                                 "missing_image")))
    names = {kind: key for key, kind in folder.bad.items()}
    assert not (tmp_path / "folder" / f"{names['missing_image']}.jpg").exists()
    with pytest.raises(UnicodeDecodeError):
        (tmp_path / "folder" / f"{names['caption_not_utf8']}.txt").read_bytes().decode("utf-8")
    with pytest.raises(ConfigError, match="bad_pairs.*json_not_json.*Hub Parquet"):
        write_hub_parquet(tmp_path / "x", SyntheticPairsConfig(count=3, bad_pairs=("json_not_json",)))


@pytest.mark.parametrize("options, parameter", [
    ({"count": 0}, "count"), ({"photo_class": "huge"}, "photo_class"), ({"colours": 1}, "colours"),
    ({"max_shapes": 3}, "max_shapes"), ({"image_format": "gif"}, "image_format"),
    ({"failed_fraction": 1.0}, "failed_fraction"), ({"bad_pairs": ("no_such",)}, "bad_pairs"),
    ({"count": 2, "bad_pairs": BAD_PAIRS}, "bad_pairs"),
])
def test_bad_options_name_their_parameter(options, parameter):
    with pytest.raises(ConfigError, match=parameter):
        SyntheticPairsConfig(**options)


def test_camera_pairs_are_camera_photos():
    pair = make_pair(0, SyntheticPairsConfig(photo_class="camera"))
    assert pair.size[0] * pair.size[1] >= 5_000_000 and 1_500_000 < len(pair.image) < 6_000_000
