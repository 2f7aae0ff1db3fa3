"""``dataio convert images s3://...``: a source folder on object storage packs as its local copy does."""

from __future__ import annotations

import pytest

from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.pairs.synthetic_pair_writers import write_caption_folder
from dataio.formats.pairs.synthetic_pairs import SyntheticPairsConfig
from tests.remote.remote_source_helpers import cli, loads, mirrored, one_line, outputs_of, put


def _both(s3, tree, tmp_path, **options) -> tuple[dict, dict]:
    """``tree`` converted from a local copy and from its S3 copy, with the same options."""
    url = mirrored(s3, tree, tmp_path / "local")
    common = dict(shard_size="150KB", num_workers=2, progress=False, **options)
    convert_images(ConvertImagesConfig(src=tmp_path / "local", out=tmp_path / "from-local", **common))
    convert_images(ConvertImagesConfig(src=url, out=tmp_path / "from-s3", storage_options=s3.options(), **common))
    return outputs_of(tmp_path / "from-local"), outputs_of(tmp_path / "from-s3")


def test_class_folders_on_s3_pack_as_their_local_copy(s3, image_folder, tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    for path in sorted(image_folder[0].rglob("*")):  # the fixture's photos and awkward files, and a few more
        if path.is_file() and not path.is_symlink():
            (tree / path.relative_to(image_folder[0])).parent.mkdir(parents=True, exist_ok=True)
            (tree / path.relative_to(image_folder[0])).write_bytes(path.read_bytes())
    first = sorted(p for p in tree.iterdir() if p.is_dir())[0]
    jpeg = next(first.glob("*.JPEG")).read_bytes()
    (first / "noext").write_bytes(jpeg)  # sniffed: a JPEG without an extension, listed
    (first / "anim.gif").write_bytes(b"GIF89a")
    (first / ".hidden.jpg").write_bytes(jpeg)
    (first / "deep" / "deeper").mkdir(parents=True)
    (first / "deep" / "deeper" / "a.jpg").write_bytes(jpeg)
    (first / "deep" / "b.jpg").write_bytes(jpeg)
    (tree / ".ipynb_checkpoints").mkdir()
    (tree / ".ipynb_checkpoints" / "x.jpg").write_bytes(jpeg)
    (tree / "stray.jpg").write_bytes(jpeg)
    (tree / "old").mkdir()
    (tree / "old" / "manifest.json").write_text("{}")
    local, remote = _both(s3, tree, tmp_path)
    assert local == remote
    reasons = {row["path"]: row["reason"] for row in loads(local["rejected"])}
    assert {f"{first.name}/noext", f"{first.name}/anim.gif", f"{first.name}/.hidden.jpg", ".ipynb_checkpoints",
            "stray.jpg", "old", f"{first.name}/zz_empty.JPEG"} <= set(reasons)
    assert len(local["classes"]) == 3 and local["num_samples"] > 30


@pytest.mark.parametrize("world", [2])
def test_ranks_split_an_s3_source_by_the_listing_sizes(s3, image_folder, tmp_path, world):
    url = mirrored(s3, image_folder[0], tmp_path / "local")
    common = dict(shard_size="150KB", num_workers=1, progress=False)
    convert_images(ConvertImagesConfig(src=tmp_path / "local", out=tmp_path / "one", **common))
    for rank in range(world):
        convert_images(ConvertImagesConfig(src=url, out=tmp_path / "ranks", storage_options=s3.options(), rank=rank,
                                           world_size=world, **common))
    assert outputs_of(tmp_path / "ranks")["rejected"] == outputs_of(tmp_path / "one")["rejected"]
    assert outputs_of(tmp_path / "ranks")["num_samples"] == outputs_of(tmp_path / "one")["num_samples"]


def test_a_caption_folder_and_views_on_s3_pack_as_their_local_copies(s3, tmp_path):
    folder = tmp_path / "pairs"
    write_caption_folder(folder, SyntheticPairsConfig(count=10, seed=4,
                                                      bad_pairs=("missing_image", "missing_caption", "huge_caption")))
    (folder / "00000001.png").write_bytes((folder / "00000001.jpg").read_bytes())  # a second picture of a name
    local, remote = _both(s3, folder, tmp_path / "captions", captions=True, max_caption_bytes=300)
    assert local == remote and local["num_samples"] >= 6
    assert any("caption without an image" in row["reason"] for row in loads(local["rejected"]))
    assert any("second picture" in row["reason"] for row in loads(local["rejected"]))
    views_local, views_remote = _both(s3, folder, tmp_path / "views", kind="views")
    assert views_local == views_remote and views_local["num_samples"] >= 9


def test_the_cli_reads_an_s3_source_with_options_per_prefix_and_refuses_bad_ones_in_one_line(s3, image_folder,
                                                                                                tmp_path):
    url = mirrored(s3, image_folder[0], tmp_path / "local")
    bucket = url[len("s3://"):].split("/")[0]
    result = cli(s3, "convert", "images", url, str(tmp_path / "out"), "--no-progress", "--shard-size", "150KB",
                 "--storage-option", f"s3://{bucket}/:client_kwargs.endpoint_url={s3.endpoint}")
    assert result.returncode == 0, result.stderr
    assert outputs_of(tmp_path / "out")["num_samples"] > 30
    missing = cli(s3, "convert", "images", f"s3://{bucket}/nothing-here", str(tmp_path / "o2"), "--no-progress")
    assert missing.returncode == 2 and f"s3://{bucket}/nothing-here" in one_line(missing)
    put(s3, f"s3://{bucket}/flat/readme.md", b"no class folders")
    flat = cli(s3, "convert", "images", f"s3://{bucket}/flat", str(tmp_path / "o3"), "--no-progress")
    assert flat.returncode == 2 and "no class subfolders" in one_line(flat)
    put(s3, f"s3://{bucket}/empty/a/readme.md", b"no images")
    empty = cli(s3, "convert", "images", f"s3://{bucket}/empty", str(tmp_path / "o4"), "--no-progress")
    assert empty.returncode == 1 and "holds no images" in one_line(empty)
    big = cli(s3, "convert", "images", url, str(tmp_path / "o5"), "--no-progress", "--max-file-size", "1KB")
    assert big.returncode == 1 and "all" in one_line(big)
    assert all("file too large: " in row["reason"] for row in loads((tmp_path / "o5" / "rejected.jsonl").read_text())
               if "zz_empty" not in row["path"] and "truncated" not in row["path"])
    denied = cli(s3, "convert", "images", url, str(tmp_path / "o6"), "--no-progress", "--storage-option",
                 "secret=wrong-secret")
    assert denied.returncode == 1 and url in one_line(denied) and "wrong-secret" not in denied.stderr
