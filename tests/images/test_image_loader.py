"""dataio.ImageLoader: contract, exactly-once, determinism, resume, error policy."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from dataio import ImageLoader
from dataio.images.contract import check_batch
from dataio.errors import SampleError, ShardError
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from tests.loader.state_shape import torchdata_keys
from tests.conftest import NUM_COLOURED, index_of


def _identities(loader) -> list[list[int]]:
    """Sample identity of every image of one epoch, batch by batch (from its colour)."""
    return [[index_of(image.numpy()) for image in images] for images, _ in loader]


@pytest.mark.parametrize("train", [True, False])
def test_contract_shapes_dtypes_layout(image_shards, train):
    loader = ImageLoader(image_shards, batch_size=16, image_size=64, train=train, num_workers=2)
    sizes = []
    for images, labels in loader:
        check_batch(images, labels, loader.config)
        sizes.append(len(labels))
    assert sizes == [16, 16, 8] and len(loader) == 3
    assert loader.batch_size == 16 and loader.num_workers == 2


def test_every_sample_exactly_once_with_partial_last_batch(coloured_shards):
    loader = ImageLoader(coloured_shards, batch_size=8, image_size=32, train=True, num_workers=2)
    seen = _identities(loader)
    assert [len(b) for b in seen] == [8] * 5 + [5]
    assert sorted(i for batch in seen for i in batch) == list(range(NUM_COLOURED))


def test_labels_follow_sorted_class_folders(coloured_shards):
    loader = ImageLoader(coloured_shards, batch_size=45, image_size=32, train=False)
    images, labels = next(iter(loader))
    assert [index_of(image.numpy()) % 3 for image in images] == labels.tolist()
    assert loader.classes == ("c0", "c1", "c2")


def test_drop_last(coloured_shards):
    loader = ImageLoader(coloured_shards, batch_size=8, image_size=32, drop_last=True)
    seen = _identities(loader)
    assert len(loader) == len(seen) == 5 and all(len(b) == 8 for b in seen)
    assert len({i for b in seen for i in b}) == 40


def test_shuffle_is_deterministic_and_independent_of_workers(coloured_shards):
    def run(workers, epoch):
        loader = ImageLoader(coloured_shards, batch_size=8, image_size=32, seed=7, num_workers=workers)
        loader.set_epoch(epoch)
        return [torch.cat([b[0].flatten() for b in loader])]
    first, threads0, other_epoch = run(2, 1), run(0, 1), run(2, 2)
    assert torch.equal(first[0], threads0[0]), "decoded pixels must not depend on num_workers"
    assert not torch.equal(first[0], other_epoch[0])


def test_epoch_advances_by_itself_and_reshuffles(coloured_shards):
    loader = ImageLoader(coloured_shards, batch_size=45, image_size=32, train=False, shuffle=True)
    first, second = _identities(loader)[0], _identities(loader)[0]
    assert loader.epoch == 2 and first != second and sorted(first) == sorted(second)
    unshuffled = ImageLoader(coloured_shards, batch_size=45, image_size=32, train=False)
    assert _identities(unshuffled)[0] == _identities(unshuffled)[0]


def test_val_mode_is_deterministic_center_crop(image_shards):
    a = [x for x, _ in ImageLoader(image_shards, batch_size=40, image_size=48, train=False)]
    b = [x for x, _ in ImageLoader(image_shards, batch_size=40, image_size=48, train=False, num_workers=0)]
    assert torch.equal(a[0], b[0])


def test_normalize_on_device_gives_float(image_shards):
    loader = ImageLoader(image_shards, batch_size=40, image_size=48, normalize=True, train=False)
    images, labels = next(iter(loader))
    check_batch(images, labels, loader.config)
    raw = next(iter(ImageLoader(image_shards, batch_size=40, image_size=48, train=False)))[0]
    mean = torch.tensor(loader.config.mean).view(1, 3, 1, 1) * 255
    std = torch.tensor(loader.config.std).view(1, 3, 1, 1) * 255
    torch.testing.assert_close(images, (raw.float() - mean) / std)


def test_resume_mid_epoch_continues_identically(coloured_shards):
    full = ImageLoader(coloured_shards, batch_size=8, image_size=32, seed=3)
    full.set_epoch(4)
    expected = _identities(full)
    first = ImageLoader(coloured_shards, batch_size=8, image_size=32, seed=3)
    first.set_epoch(4)
    iterator = iter(first)
    for _ in range(2):
        next(iterator)
    state = first.state_dict()
    assert state == {"epoch": 4, "samples_consumed": 16, "seed": 3, "world_size": 1,
                     "dataset": first.manifest.fingerprint(), **torchdata_keys(2)}
    resumed = ImageLoader(coloured_shards, batch_size=8, image_size=32, seed=3)
    resumed.load_state_dict(state)
    assert _identities(resumed) == expected[2:]


def test_ranks_get_equal_disjoint_shares(coloured_shards):
    shares = [_identities(ImageLoader(coloured_shards, batch_size=4, image_size=32, world_size=2, rank=r))
              for r in range(2)]
    counts = [sum(len(b) for b in share) for share in shares]
    assert counts == [23, 23]
    union = {i for share in shares for b in share for i in b}
    assert union == set(range(NUM_COLOURED))


def _corrupt_one_image(folder, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    _, manifest = read_manifest(broken)
    table = read_sample_table(broken / manifest.sample_table)
    victim = 5
    path = broken / manifest.shards[table.shard[victim]].file
    data = bytearray(path.read_bytes())
    start = int(table.offset[victim])
    data[start : start + int(table.size[victim])] = b"\x00" * int(table.size[victim])
    path.write_bytes(bytes(data))
    return broken, manifest.shards[table.shard[victim]].file, table.key(victim)


def test_bad_sample_raise_names_shard_and_key(coloured_shards, tmp_path):
    broken, shard, key = _corrupt_one_image(coloured_shards, tmp_path)
    loader = ImageLoader(broken, batch_size=8, image_size=32, on_error="raise")
    with pytest.raises(SampleError) as error:
        list(loader)
    assert shard in str(error.value) and key in str(error.value)


def test_bad_sample_skip_loses_only_that_sample(coloured_shards, tmp_path):
    broken, shard, key = _corrupt_one_image(coloured_shards, tmp_path)
    loader = ImageLoader(broken, batch_size=8, image_size=32, on_error="skip")
    seen = [i for batch in _identities(loader) for i in batch]
    assert len(seen) == NUM_COLOURED - 1 and len(set(seen)) == NUM_COLOURED - 1
    assert loader.stats.as_dict()["num_errors"] == 1
    assert loader.stats.errors[0]["shard"] == shard and loader.stats.errors[0]["key"] == key


def test_missing_or_truncated_shard_is_named_at_start(coloured_shards, tmp_path):
    broken = tmp_path / "missing"
    shutil.copytree(coloured_shards, broken)
    (broken / "shard-000002.tar").unlink()
    with pytest.raises(ShardError, match="shard-000002.tar.*missing"):
        ImageLoader(broken)
    shutil.copy(coloured_shards / "shard-000002.tar", broken / "shard-000002.tar")
    with open(broken / "shard-000003.tar", "r+b") as f:
        f.truncate(1024)
    with pytest.raises(ShardError, match="shard-000003.tar.*truncated"):
        ImageLoader(broken)


def test_train_false_does_not_shuffle_by_default():
    from dataio import ImageLoaderConfig

    assert ImageLoaderConfig(train=False).shuffles is False and ImageLoaderConfig().shuffles is True
    assert ImageLoaderConfig(train=False, shuffle=True).shuffles is True


def test_bad_config_is_rejected():
    from dataio import ImageLoaderConfig

    for bad in ({"batch_size": 0}, {"crop_scale": (0.5, 0.1)}, {"rank": 2, "world_size": 2}, {"on_error": "ignore"}):
        with pytest.raises(ValueError):
            ImageLoaderConfig(**bad)


def test_crop_boxes_respect_scale_ratio_and_bounds():
    from dataio.augment.crop_boxes import center_crop_boxes, random_resized_crop_boxes

    rng = np.random.default_rng(0)
    widths, heights = rng.integers(50, 800, 5000), rng.integers(50, 800, 5000)
    boxes = random_resized_crop_boxes(widths, heights, rng, (0.08, 1.0), (3 / 4, 4 / 3))
    w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    assert (boxes[:, 0] >= 0).all() and (boxes[:, 2] <= widths).all() and (boxes[:, 3] <= heights).all()
    area = w * h / (widths * heights)
    assert area.min() >= 0.08 * 0.95
    square = random_resized_crop_boxes(np.full(5000, 400), np.full(5000, 400), rng, (0.08, 1.0), (3 / 4, 4 / 3))
    square_area = (square[:, 2] - square[:, 0]) * (square[:, 3] - square[:, 1]) / 400**2
    assert 0.4 < square_area.mean() < 0.6, "areas of fitting draws are ~uniform in [0.08, 1]"
    assert (w / h).min() >= 3 / 4 * 0.95 and (w / h).max() <= 4 / 3 * 1.05
    centre = center_crop_boxes(np.array([400]), np.array([300]), 0.875)[0]
    np.testing.assert_allclose(centre, [68.75, 18.75, 331.25, 281.25])
