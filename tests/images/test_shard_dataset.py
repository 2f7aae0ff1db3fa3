"""``dataio.ShardDataset``: a map-style torch Dataset over image shards, on photos of real size."""

from __future__ import annotations

import io
import json
import logging
import multiprocessing
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import webdataset as wds
from PIL import Image
from torch.utils.data import ConcatDataset, DistributedSampler, Subset

import dataio
from dataio import ImageLoader, ShardDataset
from dataio.formats.errors import ConfigError, SampleError, ShardError
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.formats.images.wds_index import IndexConfig, index_shards

ROOT = Path(__file__).resolve().parents[2]


def _packed(folder: Path) -> tuple[list[bytes], np.ndarray]:
    """The packed bytes of every sample, and the labels, read straight from the shards."""
    folder, manifest = read_manifest(folder)
    table = read_sample_table(folder / manifest.sample_table)
    data = []
    for i in range(len(table)):
        with open(folder / manifest.shards[int(table.shard[i])].file, "rb") as handle:
            handle.seek(int(table.offset[i]))
            data.append(handle.read(int(table.size[i])))
    return data, table.label.astype(np.int64)


def _pil_pixels(data: bytes) -> torch.Tensor:
    with Image.open(io.BytesIO(data)) as image:
        return torch.from_numpy(np.array(image.convert("RGB"))).permute(2, 0, 1)


class Brightness:
    """A per-sample transform of the user's own (module level, so spawn workers can unpickle it)."""

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        return image.float().mean((1, 2))


def test_len_classes_and_targets_are_the_manifests(real_photo_shards):
    dataset = ShardDataset(real_photo_shards)
    folder, manifest = read_manifest(real_photo_shards)
    table = read_sample_table(folder / manifest.sample_table)
    assert len(dataset) == manifest.num_samples == 14 and isinstance(dataset, torch.utils.data.Dataset)
    assert dataset.classes == manifest.classes
    assert dataset.class_to_idx == {c: i for i, c in enumerate(manifest.classes)}
    assert dataset.targets == table.label.tolist()
    # each target is the class folder its source photo came from (ImageFolder's labels)
    assert [dataset.classes[t] for t in dataset.targets] == [table.path(i).split("/")[0] for i in range(len(table))]


def test_pixels_are_the_whole_image_decoded_by_dataio(real_photo_shards):
    dataset = ShardDataset(real_photo_shards)
    as_pil = ShardDataset(real_photo_shards, to_pil=True)
    data, labels = _packed(real_photo_shards)
    sizes = set()
    for i in range(len(dataset)):  # ~110 KB photos and the two 2-4 MB camera photos
        image, label = dataset[i]
        assert image.dtype == torch.uint8 and image.shape[0] == 3 and label == labels[i]
        assert torch.equal(image, _pil_pixels(data[i]))
        pil, pil_label = as_pil[i]
        assert isinstance(pil, Image.Image) and pil.mode == "RGB" and pil_label == label
        assert torch.equal(torch.from_numpy(np.array(pil)).permute(2, 0, 1), image)
        sizes.add(image.shape[1] * image.shape[2])
    assert max(sizes) > 4_000_000  # a camera photo was among them
    assert torch.equal(dataset[-1][0], dataset[len(dataset) - 1][0])
    with pytest.raises(IndexError):
        dataset[len(dataset)]


def test_transform_and_target_transform_are_applied(real_photo_shards):
    plain = ShardDataset(real_photo_shards)
    dataset = ShardDataset(real_photo_shards, Brightness(), lambda label: f"class {label}")
    image, label = dataset[3]
    assert torch.allclose(image, plain[3][0].float().mean((1, 2))) and label == f"class {plain[3][1]}"


def test_eval_view_is_what_the_loader_yields_and_subset_stacks_with_its_batches(real_photo_shards):
    """pytorch/examples imagenet: its DDP validation stacks Subset(val_loader.dataset, tail) with loader batches."""
    for normalize in (False, True):
        loader = ImageLoader(real_photo_shards, batch_size=4, image_size=64, train=False, shuffle=False,
                             num_workers=2, normalize=normalize)
        view = loader.dataset
        assert len(view) == 14 and view.classes == loader.classes and view.targets == loader.table.label.tolist()
        for batch in loader.batches():
            for image, label, sample in zip(batch.images, batch.labels, batch.samples, strict=True):
                item, item_label = view[int(sample)]
                assert item.dtype == image.dtype and item.shape == image.shape == (3, 64, 64)
                assert torch.allclose(item.float(), image.float(), atol=1e-5) and item_label == int(label)
        standalone = ShardDataset(real_photo_shards, image_size=64, normalize=normalize)
        assert torch.equal(standalone[5][0], view[5][0])
        # the tail the DistributedSampler left out, read by torch's DataLoader from the loader's data set
        tail = torch.utils.data.DataLoader(Subset(loader.dataset, range(10, 14)), batch_size=4, num_workers=0)
        tail_images, tail_labels = next(iter(tail))
        first_images, _ = next(iter(loader))
        both = torch.cat([first_images, tail_images])  # the same dtype and shape: they stack
        assert both.shape == (8, 3, 64, 64) and tail_labels.tolist() == loader.table.label[10:14].tolist()
        loader.close()
        assert torch.equal(view[5][0], standalone[5][0])  # the view reopens the shards once its loader is closed


def test_pickles_small_and_reopens_in_the_unpickling_process(real_photo_shards):
    dataset = ShardDataset(real_photo_shards, image_size=32)
    blob = pickle.dumps(dataset)
    assert len(blob) < 2048 and b"samples.arrow" not in blob  # source and options, not the table
    copy = pickle.loads(blob)
    assert copy._opened is None and len(copy) == 14  # nothing opened until a sample is read
    assert torch.equal(copy[7][0], dataset[7][0]) and copy._opened is not None
    assert len(pickle.dumps(ImageLoader(real_photo_shards, num_workers=0).dataset)) < 2048


_INHERITED: list[ShardDataset] = []  # a data set a forked child inherits (not pickled to it)


def _reader_in_child() -> tuple[int, bool, int]:
    dataset = _INHERITED[0]
    inherited = id(dataset._opened[1])
    dataset[1]
    pid, reader, owned = dataset._opened
    return inherited, owned and pid == os.getpid(), id(reader)


def test_a_forked_process_opens_its_own_reader(real_photo_shards):
    dataset = ShardDataset(real_photo_shards, image_size=32)
    _INHERITED[:] = [dataset]
    with multiprocessing.get_context("fork").Pool(1) as pool:
        inherited, own, reader = pool.apply(_reader_in_child)
    _INHERITED.clear()
    assert inherited == id(dataset._opened[1]) and own and reader != inherited


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_torch_dataloader_worker_processes(real_photo_shards, context):
    dataset = ShardDataset(real_photo_shards, image_size=48)
    dataset[0]  # opened here first: a forked worker must open its own
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2, multiprocessing_context=context)
    images, labels = zip(*loader, strict=True)
    images, labels = torch.cat(images), torch.cat(labels)
    assert labels.tolist() == dataset.targets
    assert all(torch.equal(images[i], dataset[i][0]) for i in range(len(dataset)))


def test_subset_and_concat_dataset(real_photo_shards):
    dataset = ShardDataset(real_photo_shards, image_size=32)
    subset = Subset(dataset, [9, 2])
    assert len(subset) == 2 and torch.equal(subset[0][0], dataset[9][0])
    both = ConcatDataset([dataset, ShardDataset(real_photo_shards, image_size=32, val_crop_ratio=1.0)])
    assert len(both) == 28 and both[14][1] == dataset[0][1] and not torch.equal(both[14][0], dataset[0][0])
    batch = next(iter(torch.utils.data.DataLoader(both, batch_size=28)))
    assert batch[0].shape == (28, 3, 32, 32)


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_distributed_sampler_idiom_runs_dataio_loader(real_photo_shards, world_size):
    dataset = ShardDataset(real_photo_shards)
    seen = []
    for rank in range(world_size):
        sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, seed=5)
        loader = dataio.DataLoader(dataset, batch_size=2, sampler=sampler, image_size=32, num_workers=1)
        # the sampler's own indices on this rank (given_order): the loader computes no share of its own
        assert isinstance(loader, ImageLoader) and (loader.world_size, loader.rank) == (1, 0)
        assert loader.config.shuffle and loader.config.seed == 5
        sampler.set_epoch(2)  # followed, as with a folder
        batches = list(loader.batches())
        expected = list(sampler)  # this rank's ids of epoch 2, in the sampler's order (as torch's DataLoader)
        ids = [int(s) for batch in batches for s in batch.samples]
        labels = [int(y) for batch in batches for y in batch.labels]
        assert ids == expected and len(ids) == len(sampler)  # the torch sampler's count per rank
        assert labels == [dataset.targets[s] for s in ids]
        seen += ids
        loader.close()
    assert sorted(set(seen)) == list(range(len(dataset)))  # the ranks share the data set between them


def test_a_custom_transform_gets_torchs_dataloader(real_photo_shards, caplog):
    dataset = ShardDataset(real_photo_shards, Brightness())
    with caplog.at_level(logging.INFO, logger="dataio"):
        loader = dataio.DataLoader(dataset, batch_size=5, num_workers=0)
        dataio.DataLoader(dataset, batch_size=5)
    assert type(loader) is torch.utils.data.DataLoader and loader.batch_size == 5
    assert sum("torch.utils.data.DataLoader reads it" in r.message for r in caplog.records) <= 1
    images, labels = next(iter(loader))
    assert images.shape == (5, 3) and labels.tolist() == dataset.targets[:5]
    with pytest.raises(ConfigError, match="image_size is not a keyword of torch"):
        dataio.DataLoader(dataset, batch_size=5, image_size=64)
    # without a transform, the data set's own options reach the loader (the user's keywords win)
    loader = dataio.DataLoader(ShardDataset(real_photo_shards, image_size=40, on_error="skip"), batch_size=3,
                               num_workers=0, train=False)
    assert loader.config.image_size == 40 and loader.config.on_error == "skip"
    assert next(iter(loader))[0].shape == (3, 3, 40, 40)


def test_options_are_checked(real_photo_shards, tmp_path):
    with pytest.raises(ConfigError, match="unknown keyword crop"):
        ShardDataset(real_photo_shards, crop=3)
    with pytest.raises(ConfigError, match="to_pil"):
        ShardDataset(real_photo_shards, to_pil=True, normalize=True)
    with pytest.raises(ValueError, match="val_crop_ratio"):
        ShardDataset(real_photo_shards, image_size=32, val_crop_ratio=1.5)
    with pytest.raises(Exception, match="no manifest"):
        ShardDataset(tmp_path)


def test_bad_sample_is_named_or_stood_in_for(real_photo_shards, tmp_path):
    folder = tmp_path / "damaged"
    shutil.copytree(real_photo_shards, folder)
    _, manifest = read_manifest(folder)
    table = read_sample_table(folder / manifest.sample_table)
    bad = 4
    shard = folder / manifest.shards[int(table.shard[bad])].file
    data = bytearray(shard.read_bytes())
    data[int(table.offset[bad]) + int(table.size[bad]) // 2] ^= 0xFF  # one flipped byte in the entropy data
    shard.write_bytes(bytes(data))
    with pytest.raises(SampleError, match=f"'{table.key(bad)}' in shard .*{shard.name}.*checksum mismatch"):
        ShardDataset(folder)[bad]
    good = ShardDataset(real_photo_shards)
    skipping = ShardDataset(folder, on_error="skip")
    image, label = skipping[bad]  # the next readable sample stands in: batches keep their size
    assert torch.equal(image, good[bad + 1][0]) and label == good[bad + 1][1]
    assert [e["key"] for e in skipping.errors.errors] == [table.key(bad)]
    assert torch.equal(skipping[bad + 1][0], image) and len(skipping.errors.errors) == 1
    with pytest.raises(Exception, match="max_errors=0"):
        ShardDataset(folder, on_error="warn", max_errors=0)[bad]


def test_a_manifest_changed_under_a_pickled_dataset_is_named(real_photo_shards, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(real_photo_shards, folder)
    blob = pickle.dumps(ShardDataset(folder))
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["num_rejected"] += 1
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ShardError, match="changed since the ShardDataset was built"):
        pickle.loads(blob)[0]


@pytest.fixture(scope="module")
def other_layouts(real_photos, tmp_path_factory):
    """The same photos as Arrow shards, and as WebDataset tars adopted by ``dataio index``."""
    root = tmp_path_factory.mktemp("layouts")
    convert_images(ConvertImagesConfig(src=real_photos, out=root / "arrow", format="arrow", max_shard_samples=5,
                                       num_workers=1, progress=False))
    tars = root / "tars"
    tars.mkdir()
    photos = sorted(real_photos.rglob("*.JPEG"))
    classes = sorted({p.parent.name for p in photos})
    for shard in range(2):
        with wds.TarWriter(str(tars / f"train-{shard:04d}.tar")) as sink:
            for path in photos[shard::2]:
                sink.write({"__key__": path.stem, "jpg": path.read_bytes(),
                            "cls": str(classes.index(path.parent.name)).encode()})
    index_shards(IndexConfig(shards=(tars,), progress=False, num_workers=1))
    return root / "arrow", tars, {p.stem: p for p in photos}


def test_arrow_shards_and_indexed_tars(real_photo_shards, other_layouts):
    arrow, tars, photos = other_layouts
    reference = ShardDataset(real_photo_shards)
    dataset = ShardDataset(arrow)
    assert len(dataset) == len(reference) and dataset.targets == reference.targets
    assert all(torch.equal(dataset[i][0], reference[i][0]) for i in (0, 6, 13))
    adopted = ShardDataset(tars)  # the tars' own bytes, not re-encoded: the source photos' pixels
    assert len(adopted) == len(photos)
    table = read_sample_table(tars / "samples.arrow")
    for i in range(len(adopted)):
        image, label = adopted[i]
        path = photos[table.key(i)]
        assert torch.equal(image, _pil_pixels(path.read_bytes()))
        assert label == sorted({p.parent.name for p in photos.values()}).index(path.parent.name)  # its .cls
    sampler = DistributedSampler(adopted, num_replicas=2, rank=1, shuffle=False)
    loader = dataio.DataLoader(adopted, batch_size=4, sampler=sampler, image_size=32, train=False, num_workers=1)
    assert [int(y) for _, b in loader for y in b] == [adopted.targets[i] for i in loader.sampler]


SCRIPT = """
import json, sys
import torch
from torch.utils.data import DistributedSampler, Subset
import dataio

path = sys.argv[1]
train_dataset = dataio.ShardDataset(path, lambda image: image[:, :32, :32].float().mean())
train_sampler = DistributedSampler(train_dataset, num_replicas=2, rank=0)
train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=4, sampler=train_sampler, num_workers=2)
means = [float(x) for images, _ in train_loader for x in images]
fast = dataio.DataLoader(dataio.ShardDataset(path), batch_size=3, image_size=64, train=False,
                         sampler=DistributedSampler(dataio.ShardDataset(path), num_replicas=4, rank=0, shuffle=False,
                                                    drop_last=True))
val = [images for images, _ in fast]
aux = torch.utils.data.DataLoader(Subset(fast.dataset, range(len(fast.sampler) * 4, len(fast.dataset))),
                                  batch_size=4, num_workers=2)
stacked = torch.cat(val + [images for images, _ in aux])
print(json.dumps({"train": len(means), "val": len(stacked), "shape": list(stacked.shape[1:]),
                  "classes": list(train_dataset.classes)}))
"""


def test_a_training_script_runs_as_a_subprocess(real_photo_shards, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(real_photo_shards)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    result = json.loads(done.stdout)
    assert result["train"] == 7 and result["shape"] == [3, 64, 64]
    assert result["val"] == 3 + 2  # rank 0's share of 14 over 4 ranks, and the 2 the sampler dropped
    assert result["classes"] == list(read_manifest(real_photo_shards)[1].classes)
