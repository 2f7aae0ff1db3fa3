"""DataLoader's keywords, one by one: honoured, mapped onto config fields, or refused in one line naming them."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler, SequentialSampler, WeightedRandomSampler

from dataio.formats.errors import ConfigError
from dataio.images.config import ImageLoaderConfig
from dataio.images.loader import FACE as IMAGE_FACE, FIELDS as IMAGE_FIELDS
from dataio.loader.dataloader_args import DATALOADER_KEYWORDS, dataloader_fields
from dataio.text.config import TextLoaderConfig
from dataio.text.loader import FACE as TEXT_FACE, FIELDS as TEXT_FIELDS

DATA = list(range(10))


def image(**options):
    return dataloader_fields(options, IMAGE_FIELDS, IMAGE_FACE, ImageLoaderConfig())


def text(**options):
    return dataloader_fields(options, TEXT_FIELDS, TEXT_FACE, TextLoaderConfig())


def refused(call, keyword: str, **options) -> str:
    with pytest.raises(ConfigError) as info:
        call(**options)
    message = str(info.value)
    assert keyword in info.value.parameters and keyword in message and "\n" not in message
    return message


def test_every_dataloader_keyword_is_known():
    parameters = list(inspect.signature(DataLoader.__init__).parameters)[2:]  # self, dataset
    assert sorted(parameters) == sorted(DATALOADER_KEYWORDS)


@pytest.mark.parametrize("name", ["batch_size", "shuffle", "num_workers", "pin_memory", "drop_last", "timeout"])
def test_keywords_that_are_image_fields_pass_through(name):
    value = {"batch_size": 64, "shuffle": True, "num_workers": 3, "pin_memory": True, "drop_last": True,
             "timeout": 5.0}[name]
    assert image(**{name: value}) == ({name: value}, None)


def test_batch_size_none_is_refused():
    assert "batch_size=1" in refused(image, "batch_size", batch_size=None)


def test_prefetch_factor_maps_to_batches_in_flight_per_thread():
    assert image(prefetch_factor=4)[0] == {"prefetch_batches": 4}
    refused(image, "prefetch_factor", prefetch_factor=0)
    refused(image, "prefetch_factor", prefetch_factor=2, prefetch_batches=3)
    assert "calling thread" in refused(text, "prefetch_factor", prefetch_factor=2)


def test_persistent_workers_and_in_order_are_accepted_as_booleans():
    assert image(persistent_workers=True, in_order=False)[0] == {}
    assert text(persistent_workers=False, in_order=True)[0] == {}
    refused(image, "persistent_workers", persistent_workers="yes")


def test_distributed_sampler_gives_world_shuffle_seed_and_drop_last():
    sampler = DistributedSampler(DATA, num_replicas=4, rank=3, shuffle=False, seed=9, drop_last=True)
    fields, follow = image(sampler=sampler, shuffle=False)
    # an image loader reads the sampler's own indices on this rank (given_order): no world or tail of its own
    assert fields == {"shuffle": False, "seed": 9}
    assert follow is sampler
    fields, _ = image(sampler=DistributedSampler(DATA, num_replicas=2, rank=0), drop_last=True)
    assert fields["drop_last"] is True and "drop_tail" not in fields
    # TextLoader deals whole batches: the sampler's world and drop_last
    fields, _ = text(sampler=DistributedSampler(DATA, num_replicas=2, rank=0, seed=1), drop_last=True)
    assert fields == {"world_size": 2, "rank": 0, "shuffle": True, "seed": 1, "drop_last": True}


def test_distributed_sampler_conflicts_are_refused():
    sampler = DistributedSampler(DATA, num_replicas=2, rank=1, seed=5)
    assert "mutually exclusive" in refused(image, "sampler", sampler=sampler, shuffle=True)
    refused(image, "rank", sampler=sampler, world_size=2, rank=0)
    assert "disagree" in refused(image, "seed", sampler=sampler, seed=6)
    assert image(sampler=sampler, seed=5)[0]["seed"] == 5


def test_random_and_sequential_samplers_set_shuffle():
    generator = torch.Generator().manual_seed(21)
    assert image(sampler=RandomSampler(DATA, generator=generator))[0] == {"shuffle": True, "seed": 21}
    assert image(sampler=SequentialSampler(DATA))[0] == {"shuffle": False}
    # any other sampler: an image loader reads its indices (given_order), TextLoader refuses it in one line
    weighted = WeightedRandomSampler([1.0] * 10, 10)
    assert image(sampler=weighted) == ({"shuffle": True}, weighted)
    assert "WeightedRandomSampler" in refused(text, "sampler", sampler=weighted)
    refused(text, "sampler", sampler=RandomSampler(DATA, replacement=True))


def test_generator_gives_the_seed():
    assert image(generator=torch.Generator().manual_seed(1234))[0] == {"seed": 1234}
    refused(image, "generator", generator=1234)
    refused(image, "seed", generator=torch.Generator().manual_seed(1), seed=2)


@pytest.mark.parametrize("keyword, value, hint", [
    ("batch_sampler", [[0, 1]], "batch_size="),
    ("collate_fn", lambda batch: batch, "batch_transform= (run on the device after the copy)"),
    ("worker_init_fn", lambda worker: None, "before building"),
    ("multiprocessing_context", "spawn", "threads"),
])
def test_process_and_collate_keywords_are_refused_saying_what_instead(keyword, value, hint):
    for call in (image, text):
        assert hint in refused(call, keyword, **{keyword: value})
        assert call(**{keyword: None})[0] == {}  # the default is fine


def test_timeout_needs_decode_threads():
    assert image(timeout=2, num_workers=1)[0] == {"timeout": 2, "num_workers": 1}
    assert "num_workers >= 1" in refused(image, "timeout", timeout=2, num_workers=0)
    refused(image, "timeout", timeout=-1)
    refused(text, "timeout", timeout=2)
    assert text(timeout=0)[0] == {}


def test_text_num_workers_zero_only():
    assert text(num_workers=0)[0] == {}
    assert "calling thread" in refused(text, "num_workers", num_workers=4)
    refused(image, "num_workers", num_workers=-1)


def test_pin_memory_device_must_be_the_loaders_device():
    assert image(pin_memory_device="cuda", device="cuda:0")[0] == {"device": "cuda:0"}
    assert "device='cuda'" in refused(image, "pin_memory_device", pin_memory_device="cuda")
    assert image(pin_memory_device="")[0] == {}


def test_unknown_keywords_are_named():
    refused(image, "bogus", bogus=1)
    refused(text, "image_size", image_size=32)  # an image option on the text loader
