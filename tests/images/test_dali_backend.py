"""The DALI backend (CPU pipeline here; GPU tests are marked): same contract as turbo, named errors, cached pipeline."""

from __future__ import annotations

import contextlib
import resource
import shutil

import numpy as np
import pytest
import torch

from dataio import ImageLoader
from dataio.augment import crop_boxes
from dataio.errors import SampleError
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.images.contract import check_batch
from dataio.images.shard_files import ShardFiles
from tests.conftest import NUM_COLOURED, index_of


@pytest.mark.parametrize("train", [True, False])
def test_same_contract_and_images_as_turbo(image_shards, train):
    options = dict(batch_size=16, image_size=64, train=train, seed=2, reduced_decode=False, num_workers=2)
    turbo = list(ImageLoader(image_shards, decoder="turbo", **options))
    loader = ImageLoader(image_shards, decoder="dali", **options)
    dali = list(loader)
    assert loader.decoder == "dali" and len(loader) == len(dali) == len(turbo)
    for (images, labels), (t_images, t_labels) in zip(dali, turbo, strict=True):
        check_batch(images, labels, loader.config)
        assert torch.equal(labels, t_labels)
        difference = (images.float() - t_images.float()).abs().mean()
        assert difference < 2.0, f"DALI and turbo crops differ by {difference:.2f} levels on average"


def _batch_of_packed_jpegs(shards, count: int) -> tuple[list[np.ndarray], np.ndarray]:
    """The first ``count`` packed JPEGs (restart markers, as the packer writes them) and crop boxes for them."""
    folder, manifest = read_manifest(shards)
    table = read_sample_table(folder / manifest.sample_table)
    with contextlib.closing(ShardFiles(folder, manifest)) as files:
        encoded = [np.frombuffer(files.read(int(table.shard[i]), int(table.offset[i]), int(table.size[i])),
                                 dtype=np.uint8) for i in range(count)]
    rng = np.random.default_rng(8)
    boxes = crop_boxes.random_resized_crop_boxes(table.width[:count], table.height[:count], rng, (0.08, 1.0), (3 / 4, 4 / 3))
    return encoded, boxes


def _splice_gives_the_same_images(shards, device_id):
    from dataio.images.dali_decode import DaliDecoder, cut_to_boxes

    encoded, boxes = _batch_of_packed_jpegs(shards, 24)
    cut, moved = cut_to_boxes(encoded, boxes)
    assert sum(len(c) < len(e) for c, e in zip(cut, encoded, strict=True)) >= 12, "most crops should cut the file down"
    flipped = np.arange(24) % 2 == 1
    outputs = [DaliDecoder(max_batch=24, threads=2, device_id=device_id, splice=splice).decode(
        encoded, boxes, flipped, 48) for splice in (True, False)]
    assert torch.equal(outputs[0], outputs[1])


def test_spliced_jpegs_give_dali_the_same_images(image_shards):
    _splice_gives_the_same_images(image_shards, None)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_spliced_jpegs_give_nvjpeg_the_same_images(image_shards):
    """nvJPEG (hybrid or hardware decoder) on the cut files: the same pixels as on the whole files."""
    _splice_gives_the_same_images(image_shards, 0)


def test_exactly_once_and_rank_split(coloured_shards):
    seen = []
    for rank in range(2):
        loader = ImageLoader(coloured_shards, decoder="dali", batch_size=8, image_size=32, world_size=2, rank=rank,
                             drop_last=False, num_workers=1)
        batches = [[index_of(image.numpy()) for image in images] for images, _ in loader]
        assert len(batches) == len(loader)
        seen.append([i for b in batches for i in b])
    assert len(seen[0]) == len(seen[1]) == 23  # 45 samples over 2 ranks: one repeat pads rank 1
    assert set(seen[0]) | set(seen[1]) == set(range(NUM_COLOURED))


def test_val_mode_is_deterministic_and_pipeline_is_built_once(image_shards):
    loader = ImageLoader(image_shards, decoder="dali", train=False, batch_size=16, image_size=48)
    epochs = [torch.cat([images for images, _ in loader]) for _ in range(3)]
    assert torch.equal(epochs[0], epochs[1]) and torch.equal(epochs[1], epochs[2])
    assert loader._dali.builds == 1
    loader.close()


def test_building_loaders_repeatedly_does_not_leak(image_shards):
    def build_and_run() -> None:
        with ImageLoader(image_shards, decoder="dali", batch_size=16, image_size=48) as loader:
            for _ in loader:
                pass

    build_and_run()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(6):
        build_and_run()
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 100, f"peak RSS grew {grown_mb:.0f} MB over 6 loaders"


def _corrupt_one_sample(src, dst, position: int = 10) -> str:
    shutil.copytree(src, dst)
    folder, manifest = read_manifest(dst)
    table = read_sample_table(folder / manifest.sample_table)
    shard = folder / manifest.shards[int(table.shard[position])].file
    data = bytearray(shard.read_bytes())
    offset = int(table.offset[position])
    data[offset:offset + 200] = bytes(200)  # wipe the JPEG headers: undecodable
    shard.write_bytes(bytes(data))
    return table.key(position)


def test_broken_sample_is_named_and_skippable(coloured_shards, tmp_path):
    key = _corrupt_one_sample(coloured_shards, tmp_path / "broken")
    # verify_samples=False: the checksum would name the sample before DALI sees it; here DALI's bisection is tested
    loader = ImageLoader(tmp_path / "broken", decoder="dali", batch_size=8, image_size=32, shuffle=False,
                         verify_samples=False)
    with pytest.raises(SampleError) as error:
        list(loader)
    assert key in str(error.value) and "shard-" in str(error.value) and "DALI" in str(error.value)
    skipping = ImageLoader(tmp_path / "broken", decoder="dali", batch_size=8, image_size=32, on_error="skip",
                           verify_samples=False)
    seen = [index_of(image.numpy()) for images, _ in skipping for image in images]
    assert len(seen) == NUM_COLOURED - 1 and len(skipping.stats.errors) == 1
    assert key in str(skipping.stats.errors[0])


def test_auto_picks_turbo_without_gpu_and_options_are_checked(image_shards):
    if not torch.cuda.is_available():
        assert ImageLoader(image_shards, decoder="auto").decoder == "turbo"
    with pytest.raises(ValueError, match="crop_on_device"):
        ImageLoader(image_shards, decoder="dali", crop_on_device=True)
    with pytest.raises(ValueError, match="decoder"):
        ImageLoader(image_shards, decoder="nvjpeg")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_dali_matches_cpu_contract(image_shards):
    options = dict(batch_size=16, image_size=64, seed=2, normalize=False)
    gpu = ImageLoader(image_shards, decoder="auto", device="cuda", **options)
    assert gpu.decoder == "dali"
    cpu = list(ImageLoader(image_shards, decoder="dali", **options))
    for (images, labels), (c_images, c_labels) in zip(gpu, cpu, strict=True):
        check_batch(images, labels, gpu.config)
        assert images.is_cuda and torch.equal(labels.cpu(), c_labels)
        assert (images.cpu().float() - c_images.float()).abs().mean() < 3.0
