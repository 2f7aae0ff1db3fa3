"""``dataio convert coco s3://.../images s3://.../instances.json OUT``: COCO on object storage packs as its local copy."""

from __future__ import annotations

import json

from dataio.formats.coco.coco_convert import ConvertCocoConfig, convert_coco
from tests.remote.remote_source_helpers import cli, mirrored, one_line, outputs_of


def test_coco_on_s3_packs_as_its_local_copy_and_a_missing_json_is_one_line(s3, coco_folder, tmp_path):
    images, annotations = coco_folder
    document = json.loads(annotations.read_text())
    document["images"].append({**document["images"][0], "id": 10**6, "file_name": "missing.jpg"})  # rejected
    tree = tmp_path / "tree"
    (tree / "images").mkdir(parents=True)
    for path in sorted(images.iterdir()):
        (tree / "images" / path.name).write_bytes(path.read_bytes())
    (tree / "instances.json").write_text(json.dumps(document))
    url = mirrored(s3, tree, tmp_path / "local")
    common = dict(max_shard_samples=4, num_workers=2, progress=False)
    convert_coco(ConvertCocoConfig(images=tmp_path / "local" / "images", annotations=tmp_path / "local" /
                                   "instances.json", out=tmp_path / "from-local", **common))
    convert_coco(ConvertCocoConfig(images=f"{url}/images", annotations=f"{url}/instances.json",
                                   out=tmp_path / "from-s3", storage_options=s3.options(), **common))
    local, remote = outputs_of(tmp_path / "from-local"), outputs_of(tmp_path / "from-s3")
    assert local["shards"] == remote["shards"] and local["table"] == remote["table"] and local["num_samples"] >= 10
    assert [r["path"] for r in map(json.loads, local["rejected"].splitlines())] == \
        [r["path"] for r in map(json.loads, remote["rejected"].splitlines())]
    for world_rank in range(2):
        convert_coco(ConvertCocoConfig(images=f"{url}/images", annotations=f"{url}/instances.json",
                                       out=tmp_path / "ranks", storage_options=s3.options(), rank=world_rank,
                                       world_size=2, **common))
    assert outputs_of(tmp_path / "ranks")["num_samples"] == local["num_samples"]
    missing = cli(s3, "convert", "coco", f"{url}/images", f"{url}/nope.json", str(tmp_path / "o2"), "--no-progress")
    assert missing.returncode == 1 and f"{url}/nope.json" in one_line(missing)
