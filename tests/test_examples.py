"""The scripts of ``examples/`` run as a user runs them: subprocesses, cut down to a few steps, on real-size photos.

Each must exit 0 and leave nothing on stderr but the lines listed with it (each with its reason),
so a traceback, an ``Exception ignored in ...`` at exit or a new warning fails the test; and its
output must show that it did its job (every validation image counted once, a resumed run
starting where the stopped one saved, the same weights, Arrow shards read by ``datasets``...).
Photos: ``real_photos`` (12 of ~110 KB and 2 camera photos of 2.4-3.7 MB in 2 classes) for
training; validation is 5 of them (one a camera photo), an odd count, so that the imagenet
example's ``DistributedSampler(drop_last=True)`` leaves it a remainder to read through ``Subset``.
Image-text pairs: ``real_pair_tars`` (20 photos of ~110 KB with captions, as img2dataset writes them).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.images.wds_index import IndexConfig, index_shards
from dataio.formats.text.tokenizer_setup import TokenizerConfig

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
SMALL = ["--image-size", "64", "--batch-size", "4"]
VAL_PHOTOS = 5


def run(command: list, cwd: Path, allowed: tuple[str, ...] = (), env: dict | None = None,
        timeout: int = 180) -> str:
    """Run an example; exit 0 and no stderr line but those matching ``allowed`` (regexes); returns stdout."""
    done = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})  # 2 shared cores
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    unexpected = [line for line in done.stderr.splitlines()
                  if line.strip() and not any(re.search(pattern, line) for pattern in allowed)]
    assert not unexpected, "unexpected stderr:\n" + "\n".join(unexpected)
    return done.stdout


@pytest.fixture(scope="module")
def val_photos(real_photos, tmp_path_factory) -> Path:
    """5 of the photos in their class folders, one a camera photo (several MB)."""
    root = tmp_path_factory.mktemp("val_photos")
    photos = sorted(real_photos.rglob("*.JPEG"))
    chosen = [p for p in photos if p.name.startswith("camera_")][:1]
    chosen += [p for p in photos if not p.name.startswith("camera_")][:VAL_PHOTOS - 1]
    for photo in chosen:
        (root / photo.parent.name).mkdir(exist_ok=True)
        shutil.copy(photo, root / photo.parent.name / photo.name)
    return root


@pytest.fixture(scope="module")
def imagenet_shards(real_photo_shards, val_photos, tmp_path_factory) -> Path:
    """``DATA/train`` and ``DATA/val`` shard folders, as the image examples take them."""
    data = tmp_path_factory.mktemp("imagenet_shards")
    (data / "train").symlink_to(real_photo_shards)
    convert_images(ConvertImagesConfig(src=val_photos, out=data / "val", num_workers=1, progress=False))
    return data


def test_imagenet_main_under_torchrun_trains_validates_every_photo_once_and_resumes(imagenet_shards, tmp_path):
    script = EXAMPLES / "imagenet_main.py"
    common = [*TORCHRUN, script, imagenet_shards, "-a", "resnet_tiny", "-j", "1", "-b", "4", "--image-size", "64",
              "-p", "1"]
    first = run([*common, "--epochs", "1"], tmp_path)
    assert first.count("Epoch: [0][2/2]") == 2  # 14 photos, 7 per rank: 2 batches of 4 on each
    assert first.count(" * 5 images") == 2  # each rank: its 2 + the other's 2 (all_reduce) + the remainder (Subset)
    assert torch.load(tmp_path / "checkpoint.pth.tar", weights_only=True)["epoch"] == 1
    resumed = run([*common, "--epochs", "2", "--resume", "checkpoint.pth.tar"], tmp_path)
    assert resumed.count("=> loaded checkpoint 'checkpoint.pth.tar' (epoch 1)") == 2
    assert "Epoch: [0]" not in resumed and resumed.count("Epoch: [1][2/2]") == 2
    assert resumed.count(" * 5 images") == 2
    assert torch.load(tmp_path / "checkpoint.pth.tar", weights_only=True)["epoch"] == 2


def test_shard_dataset_with_torch_workers_and_own_transforms(imagenet_shards, tmp_path):
    out = run([sys.executable, EXAMPLES / "shard_dataset_transforms.py", imagenet_shards, "--epochs", "2",
               "--steps", "2", "--workers", "2", "--width", "8", *SMALL], tmp_path)
    batch = re.search(r"train batch \(4, 3, 64, 64\) torch.float32 mean=(\S+) std=(\S+)", out)
    assert batch and abs(float(batch[1])) < 1.5 and 0.3 < float(batch[2]) < 2  # normalised by the own transform
    assert out.count(f"({VAL_PHOTOS} images)") == 2 and "epoch 1:" in out
    assert torch.load(tmp_path / "checkpoint.pt", weights_only=True)["epoch"] == 2


def test_lightning_datamodule_fits_stops_mid_epoch_resumes_and_tests(imagenet_shards, tmp_path):
    common = [sys.executable, EXAMPLES / "lightning_datamodule.py", imagenet_shards, "--out", tmp_path / "run",
              "--epochs", "2", "--workers", "1", "--width", "8", "--checkpoint-every", "1", *SMALL]
    stopped = run([*common, "--max-steps", "2"], tmp_path)
    assert "epoch 0: trained on 8 images (global step 2)" in stopped and "test:" not in stopped
    resumed = run([*common, "--resume", "last"], tmp_path)
    # the loader's position came back with the checkpoint: the rest of epoch 0 (14 - 8 photos), then all of epoch 1
    assert "epoch 0: trained on 6 images (global step 4)" in resumed
    assert "epoch 1: trained on 14 images (global step 8)" in resumed
    assert f"'val_images': {VAL_PHOTOS}.0" in resumed and "test: {'test_acc':" in resumed


def write_hub_parquet(folder: Path, path: Path) -> None:
    """``folder``'s photos as one Parquet file of the Hub's image layout (as `datasets` writes ImageNet-1k)."""
    classes = sorted(d.name for d in folder.iterdir() if d.is_dir())
    rows = [(p, classes.index(p.parent.name)) for p in sorted(folder.rglob("*.JPEG"))]
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    features = {"image": {"_type": "Image"}, "label": {"_type": "ClassLabel", "names": classes}}
    schema = pa.schema([("image", image_type), ("label", pa.int64())]).with_metadata(
        {"huggingface": json.dumps({"info": {"features": features}})})
    table = pa.table({"image": pa.array([{"bytes": p.read_bytes(), "path": p.name} for p, _ in rows], image_type),
                      "label": pa.array([label for _, label in rows], pa.int64())}, schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=4)


def test_hub_parquet_to_arrow_shards_read_by_datasets_and_trained_on(real_photos, val_photos, tmp_path):
    write_hub_parquet(real_photos, tmp_path / "hub/data/train-00000-of-00001.parquet")
    write_hub_parquet(val_photos, tmp_path / "hub/data/validation-00000-of-00001.parquet")
    out = run([sys.executable, EXAMPLES / "hub_parquet.py", "hub/data/train-*.parquet", "shards/train", "--val",
               "hub/data/validation-00000-of-00001.parquet", "--steps", "3", "--workers", "1", "--width", "8",
               "--no-progress", *SMALL], tmp_path)
    assert "packed 14 images into" in out and f"packed {VAL_PHOTOS} images into" in out
    assert "datasets: 14 rows" in out and "labels as dataio's: True, first image as dataio's: True" in out
    assert "epoch 0: 3 steps" in out and re.search(rf"val: \d/{VAL_PHOTOS} right", out)
    assert sorted(p.suffix for p in (tmp_path / "shards/train").glob("shard-*")) == [".arrow"]


def test_s3_shards_with_the_endpoint_from_the_environment(real_photos, imagenet_shards, tmp_path):
    from tests.remote.conftest import KEY, SECRET, S3  # moto's S3 server on 127.0.0.1

    s3 = S3()
    try:
        s3.fs().mkdir("bucket")
        for path in sorted((imagenet_shards / "val").iterdir()):  # val: uploaded as any tool would
            s3.fs().put_file(str(path), f"bucket/imagenet/val/{path.name}")
        env = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET,
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
               "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent"}
        out = run([sys.executable, EXAMPLES / "s3_shards.py", "s3://bucket/imagenet/train", "--val",
                   "s3://bucket/imagenet/val", "--convert-from", real_photos, "--staging", tmp_path / "staging",
                   "--cache-dir", tmp_path / "cache", "--epochs", "2", "--steps", "2", "--workers", "1",
                   "--width", "8", *SMALL], tmp_path, env=env)
    finally:
        s3.stop()
    assert "s3://bucket/imagenet/train: 14 images in 2 classes" in out
    cached = [float(mb) for mb in re.findall(r"cache (\S+) MB, 0 bad samples", out)]
    assert len(cached) == 2 and cached[0] > 1  # fetched ranges kept (a camera photo alone is over 2 MB)
    assert re.search(rf"val: \d/{VAL_PHOTOS} right", out)


def test_gpt_on_text_loader_resumed_mid_epoch_ends_with_the_same_weights(text_shards, tmp_path):
    common = [sys.executable, EXAMPLES / "gpt_text.py", text_shards, "--steps", "6", "--block-size", "128",
              "--batch-size", "4", "--max-tokens", "1024", "--dim", "32", "--layers", "1", "--heads", "2",
              "--log-every", "1"]
    whole = run([*common, "--out", tmp_path / "whole", "--val", text_shards], tmp_path)
    stopped = run([*common, "--out", tmp_path / "cut", "--stop-after", "3"], tmp_path)
    resumed = run([*common, "--out", tmp_path / "cut", "--val", text_shards, "--resume"], tmp_path)
    steps = [re.findall(r"^step (\d+)/6 epoch 0 loss=(\S+) tokens=\d+ rows=4x128$", text, re.M)
             for text in (whole, stopped, resumed)]
    assert len(steps[0]) == 6 and steps[1] + steps[2] == steps[0]  # the same batches, the same losses
    assert "resumed at step 3, epoch 0, 12 rows into it" in resumed
    digests = [re.search(r"finished at step 6: .* weights sha256 (\w+)", text)[1] for text in (whole, resumed)]
    assert digests[0] == digests[1]  # bit-identical on a CPU
    val = re.search(r"val: loss=(\S+) ppl=\S+ over (\d+) tokens in (\d+) token-budget batches", whole)
    manifest = json.loads((text_shards / "manifest.json").read_text())
    # every validation sample once: all its tokens but the last have a label
    assert val and int(val[2]) == manifest["options"]["num_tokens"] - manifest["num_samples"] and int(val[3]) > 1
    assert float(val[1]) < math.log(600)  # better than a uniform guess over the 600 tokens, where it starts


def test_detection_loop_learns_the_boxes_of_coco_shards(coco_shards, tmp_path):
    """The user's own detection loop (issue 36): ImageLoader's dict batches, boxes through the detection crop and
    flip; 60 steps at 96 px find the held-out photos' shapes (AP at IoU 0.5, each photo and box counted once)."""
    from dataio.formats.coco.coco_convert import ConvertCocoConfig, convert_coco
    from dataio.formats.coco.synthetic_coco import SyntheticCocoConfig, write_coco_folder

    data = tmp_path / "data"
    data.mkdir()
    (data / "train").symlink_to(coco_shards)
    images, annotations = write_coco_folder(tmp_path / "val-photos", SyntheticCocoConfig(images=4, seed=37))
    convert_coco(ConvertCocoConfig(images=images, annotations=annotations, out=data / "val", num_workers=1,
                                   progress=False))
    out = run([sys.executable, EXAMPLES / "detection_loop.py", data, "--epochs", "20", "--image-size", "96",
               "--batch-size", "4", "--workers", "1", "--print-freq", "2"], tmp_path)
    steps = re.findall(r"^epoch (\d+) step (\d)/3 loss=(\S+) .* boxes=(\d+) ", out, re.M)
    assert len(steps) == 40 and all(int(boxes) > 0 for *_, boxes in steps)  # steps 1 and 3 of each epoch
    vals = re.findall(r"^epoch (\d+) val: 4 images, 16 boxes, AP50=(\S+) recall50=(\S+)$", out, re.M)
    assert [int(epoch) for epoch, *_ in vals] == list(range(20))
    assert float(vals[0][1]) < 0.1 and float(vals[-1][1]) > 0.5 and float(vals[-1][2]) > 0.5, vals[-1]


def test_clip_pairs_trains_in_its_own_loop_on_img2dataset_photos_and_counts_every_val_pair(real_pair_tars, tmp_path):
    shutil.copytree(real_pair_tars, tmp_path / "photos")  # 20 photos of real size, as img2dataset wrote them
    index_shards(IndexConfig(shards=(tmp_path / "photos",), tokenizer=TokenizerConfig(train="bpe", vocab_size=300),
                             num_workers=1, progress=False))
    out = run([sys.executable, EXAMPLES / "clip_pairs.py", "photos", "--val", "photos", "--steps", "3",
               "--context-length", "24", "--workers", "1", "--width", "8", *SMALL], tmp_path)
    fields = re.search(r"^batch fields: image \(2, 3, 64, 64\) torch.float32, input_ids \(2, (\d+)\) torch.int64, "
                       r"attention_mask \(2, \1\) torch.int64, sample_ids \(2,\) torch.int64, repeated \(2,\) "
                       r"torch.bool, caption '[a-z ,]+', key '\d+', json \{'url': 'https://\S+', 'width': \d+\}$", out,
                       re.M)
    assert fields and int(fields[1]) <= 24, out  # cut at the context length
    loss = re.search(r"^epoch 0: 3 steps, loss (\S+) -> (\S+)$", out, re.M)
    assert loss and all(math.isfinite(float(value)) for value in loss.groups()), out
    recall = re.search(r"^val: 20 pairs i2t_r1=(\S+) t2i_r1=(\S+) i2t_r5=(\S+) t2i_r5=(\S+)$", out, re.M)
    assert recall and all(0 <= float(value) <= 1 for value in recall.groups()), out  # every pair once
