"""The DataLoader surface of both loaders: attributes, .dataset, .sampler, StatefulDataLoader-shaped state, the swap."""

from __future__ import annotations

import json
import re
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DistributedSampler

import dataio
from dataio import ImageLoader, TextLoader
from dataio.formats.errors import ConfigError, DataioError, UsageError
from tests.conftest import NUM_COLOURED, colour_of, index_of
from tests.loader.state_shape import torchdata_keys


def colour_ids(loader: ImageLoader) -> list[int]:
    """The colour index (``colour_of``) of every sample id, read through ``loader.dataset``."""
    return [index_of(image.numpy()) for image, _ in (loader.dataset[i] for i in range(len(loader.dataset)))]


def test_image_loader_attributes_as_dataloader(coloured_shards):
    loader = ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=2, prefetch_factor=3,
                         persistent_workers=True, pin_memory=True, drop_last=True, shuffle=False)
    assert (loader.batch_size, loader.num_workers, loader.prefetch_factor, loader.drop_last) == (4, 2, 3, True)
    assert loader.pin_memory and loader.persistent_workers and loader.timeout == 0
    # as DataLoader(range(45), batch_size=4, drop_last=True): the sampler lists all 45, the short batch is dropped
    torch_loader = torch.utils.data.DataLoader(range(NUM_COLOURED), batch_size=4, drop_last=True)
    assert len(loader) == len(torch_loader) == NUM_COLOURED // 4
    assert list(loader.sampler) == list(torch_loader.sampler) == list(range(NUM_COLOURED))
    assert list(loader.batch_sampler) == list(torch_loader.batch_sampler) and len(loader.batch_sampler) == 11
    assert (loader.batch_sampler.batch_size, loader.batch_sampler.drop_last) == (4, True)


def test_image_dataset_indexes_samples_as_imagefolder(coloured_shards):
    loader = ImageLoader(coloured_shards, batch_size=4, image_size=16)
    dataset = loader.dataset
    assert len(dataset) == NUM_COLOURED and dataset.classes == ("c0", "c1", "c2")
    assert dataset.targets == [0] * 15 + [1] * 15 + [2] * 15  # the table lists class folders in order
    colours = colour_ids(loader)
    assert sorted(colours) == list(range(NUM_COLOURED))  # each sample decodes to its own image
    image, label = dataset[16]
    k = colours[16]
    assert image.dtype == torch.uint8 and image.shape == (3, 16, 16)  # as the loader yields it in eval mode
    whole, _ = dataio.ShardDataset(coloured_shards)[16]  # the whole image
    assert whole.shape == ((3, 200, 300), (3, 300, 200), (3, 256, 256))[k % 3]  # PIL sizes are (W, H)
    assert label == k % 3 == 1  # img{k} was written to class folder c{k % 3}
    assert np.abs(image.float().mean((1, 2)).numpy() - colour_of(k)).max() < 3
    assert index_of(dataset[-1][0].numpy()) == colours[-1]
    with pytest.raises(IndexError):
        dataset[NUM_COLOURED]


def test_sampler_set_epoch_selects_the_epoch_and_iterates_this_ranks_ids(coloured_shards):
    ranks = [ImageLoader(coloured_shards, batch_size=4, image_size=16, world_size=2, rank=r, seed=3) for r in (0, 1)]
    for loader in ranks:
        loader.sampler.set_epoch(5)
    assert all(loader.epoch == 5 and loader.sampler.epoch == 5 for loader in ranks)
    ids = [list(loader.sampler) for loader in ranks]
    assert sorted(set(ids[0]) | set(ids[1])) == list(range(NUM_COLOURED)) and len(ids[0]) == len(ids[1]) == 23
    seen = [int(s) for b in ranks[0].batches() for s in b.samples]
    assert seen == ids[0]  # the sampler lists what the pass yields
    ranks[1].sampler.set_epoch(6)
    assert list(ranks[1].sampler) != ids[1]


def test_user_distributed_sampler_set_epoch_is_followed(coloured_shards):
    sampler = DistributedSampler(range(NUM_COLOURED), num_replicas=2, rank=1, seed=3)
    loader = dataio.DataLoader(coloured_shards, batch_size=4, sampler=sampler, image_size=16, normalize=False)
    # the loader reads the sampler's own indices on this rank (given_order), as torch's DataLoader over it
    assert (loader.world_size, loader.rank, loader.config.shuffle, loader.config.seed) == (1, 0, True, 3)
    assert loader.config.train  # the sampler shuffles: training transforms
    sampler.set_epoch(4)  # the script's own sampler, as DLO-JZ scripts call it
    seen = [int(s) for images, _ in loader for s in [index_of(i.numpy()) for i in images]]
    colours = colour_ids(ImageLoader(coloured_shards, batch_size=4, image_size=16, world_size=2, rank=1, seed=3))
    assert sampler.epoch == 4 and seen == [colours[s] for s in list(sampler)]
    with pytest.raises(ConfigError, match="sampler was built over 10 samples"):
        ImageLoader(coloured_shards, sampler=DistributedSampler(range(10), num_replicas=1, rank=0))


def test_state_dict_has_statefuldataloader_shape_and_both_shapes_load(coloured_shards):
    def loader():
        return ImageLoader(coloured_shards, batch_size=4, image_size=16, seed=2)

    full = [b.samples.tolist() for b in loader().batches()]
    first = loader()
    batches = first.batches()
    for _ in range(3):
        next(batches)
    state = json.loads(json.dumps(first.state_dict()))
    position = {"epoch": 0, "samples_consumed": 12, "seed": 2, "world_size": 1,
                "dataset": first.manifest.fingerprint()}
    assert state == {**position, **torchdata_keys(3)}
    for saved in (state, position):  # StatefulDataLoader's shape, or the flat one of earlier versions
        resumed = loader()
        resumed.load_state_dict(saved)
        resumed.sampler.set_epoch(0)  # as a training loop does at the top of the resumed epoch: keeps the position
        # len: the epoch's batches (Lightning ends a resumed epoch at len); a flat state does not say how many went
        assert len(resumed) == (len(full) if "_num_yielded" in saved else len(full) - 3)
        rest = [b.samples.tolist() for b in resumed.batches()]
        assert rest == full[3:]
        assert resumed.state_dict()["_num_yielded"] == 0 and resumed.epoch == 1
    untouched = loader()
    for empty in ({}, None):  # a checkpoint that lost its loader state: refused, never a silent restart
        with pytest.raises(ValueError, match="empty|must be a dict"):
            untouched.load_state_dict(empty)
    assert [b.samples.tolist() for b in untouched.batches()] == full
    with pytest.raises(ValueError, match="no dataio position"):
        loader().load_state_dict({**torchdata_keys(3)})
    with pytest.raises(ValueError, match="_num_yielded"):
        loader().load_state_dict({**state, "_num_yielded": -1})


def test_set_epoch_to_another_epoch_after_a_load_starts_that_epoch(coloured_shards):
    first = ImageLoader(coloured_shards, batch_size=4, image_size=16)
    batches = first.batches()
    next(batches)
    resumed = ImageLoader(coloured_shards, batch_size=4, image_size=16)
    resumed.load_state_dict(first.state_dict())
    resumed.set_epoch(1)  # not the loaded epoch: the whole of epoch 1
    samples = [int(s) for b in resumed.batches() for s in b.samples]
    assert sorted(samples) == list(range(NUM_COLOURED)) and resumed.epoch == 2


def test_timeout_raises_when_a_batch_does_not_come(coloured_shards, monkeypatch):
    loader = ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=1, timeout=0.2)
    real = loader.shards.read
    monkeypatch.setattr(loader.shards, "read", lambda sample, *rest: time.sleep(1) or real(sample, *rest))
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out after 0.2 seconds"):
        next(iter(loader))
    assert time.monotonic() - started < 0.9
    loader.close()


def test_text_loader_face(text_shards):
    loader = dataio.DataLoader(text_shards, batch_size=8, shuffle=True, num_workers=0, drop_last=True,
                               persistent_workers=True, generator=torch.Generator().manual_seed(5))
    assert isinstance(loader, TextLoader) and loader.config.mode == "fixed" and loader.config.seed == 5
    assert (loader.batch_size, loader.num_workers, loader.drop_last, loader.pin_memory) == (8, 0, True, False)
    assert len(loader.dataset) == len(loader.shards) and loader.dataset[0].dtype == torch.int64
    ids, planned = list(loader.sampler), list(loader.batch_sampler)  # the next pass's (then the epoch moves on)
    assert len(ids) == 8 * len(loader) and len(set(ids)) == len(ids) and len(planned) == len(loader)
    batches = [batch["sample_ids"].tolist() for batch in loader]
    assert [s for batch in batches for s in batch] == ids and planned == batches
    assert (loader.batch_sampler.batch_size, loader.batch_sampler.drop_last) == (8, True)
    assert TextLoader(text_shards).batch_size is None  # budget mode: rows vary per batch
    with pytest.raises(ConfigError, match="num_workers"):
        dataio.DataLoader(text_shards, batch_size=8, num_workers=4)


def test_swap_refuses_unconverted_folders_with_the_command(image_folder, tmp_path):
    root = image_folder[0]
    with pytest.raises(UsageError, match=re.escape(f"`dataio convert images {root} OUT`")):
        dataio.DataLoader(root, batch_size=4)
    split = tmp_path / "imagenet"  # train/<class>/<image>: two levels down
    (split / "train" / "n01").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(split / "train" / "n01" / "a.JPEG")
    with pytest.raises(UsageError, match="has not been converted"):
        dataio.DataLoader(split)
    with pytest.raises(UsageError, match=re.escape(f"dataio convert images {root} OUT")):
        dataio.DataLoader(SimpleNamespace(root=str(root)))  # what torchvision's ImageFolder looks like
    with pytest.raises(UsageError, match="not a list"):
        dataio.DataLoader([1, 2, 3])
    with pytest.raises(DataioError, match="no manifest"):
        dataio.DataLoader(tmp_path)  # an empty folder: no images, no manifest


def test_swap_keeps_dataloader_defaults(coloured_shards):
    loader = dataio.DataLoader(coloured_shards)
    assert loader.batch_size == 1 and not loader.config.shuffles and len(loader) == NUM_COLOURED
    positional = dataio.DataLoader(coloured_shards, 5, True, image_size=16)
    assert positional.batch_size == 5 and positional.config.shuffles


def test_with_ids_yields_image_batches_and_forwards_the_loader_surface(coloured_shards):
    loader = ImageLoader(coloured_shards, batch_size=4, image_size=16, num_workers=1, world_size=2, rank=1,
                         train=False)
    view = loader.with_ids()
    assert len(view) == len(loader) == 6 and view.batch_size == 4 and view.dataset.classes == loader.classes
    assert list(view.sampler) == list(loader.sampler) and list(view.batch_sampler) == list(loader.batch_sampler)
    for _ in range(2):  # each iter is a pass, as a DataLoader's
        batches = list(view)
        assert [b.samples.tolist() for b in batches] == list(loader.batch_sampler)
        assert [int(b.repeated.sum()) for b in batches] == [0] * 5 + [1]  # 45 over 2 ranks: one repeat
        assert all(len(b.images) == len(b.labels) == len(b.samples) for b in batches)
    assert view.state_dict() == loader.state_dict()
    loader.close()
