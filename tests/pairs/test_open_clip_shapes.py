"""What open_clip's loops take from a pair folder: fixed 77-wide ids, ``(images, input_ids)`` tuples, the ids in
``ShardDataset`` items, its evaluation view (crop ratio 1.0) and the ``num_samples``/``num_batches`` it reads."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader as TorchLoader

import dataio
from dataio.errors import ConfigError
from dataio.pairs.caption_config import CaptionConfig
from tests.pairs.test_pair_loader import table

OPTIONS = dict(batch_size=8, image_size=32, train=False, num_workers=1)


def test_fixed_padding_gives_77_wide_rows_padded_with_the_recorded_id_and_the_eos_kept_when_cut(pair_tars):
    rows = table(pair_tars)
    loader = dataio.PairLoader(pair_tars, captions=CaptionConfig(max_length=77, pad_to_max_length=True), **OPTIONS)
    for batch in loader:
        ids, mask = batch["input_ids"], batch["attention_mask"]
        assert ids.shape == (len(batch["sample_ids"]), 77)
        assert (ids[mask == 0] == loader.pad_id).all()
        for row, sample in enumerate(batch["sample_ids"].tolist()):
            stored = rows["input_ids"][sample]
            assert ids[row, :len(stored)].tolist() == stored
    eos = rows["input_ids"][0][-1]
    cut = dataio.PairLoader(pair_tars, captions=CaptionConfig(max_length=4, pad_to_max_length=True), **OPTIONS)
    for batch in cut:  # as open_clip's tokenize cuts: the first tokens, the last one replaced by the EOT
        assert batch["input_ids"].shape[1] == 4
        for row, sample in enumerate(batch["sample_ids"].tolist()):
            stored = rows["input_ids"][sample]
            assert batch["input_ids"][row].tolist() == (stored if len(stored) <= 4 else [*stored[:3], eos])


def test_tuple_output_is_open_clips_images_and_texts(pair_tars):
    loader = dataio.PairLoader(pair_tars, captions=CaptionConfig(output="tuple", pad_to_max_length=True),
                               normalize=True, **OPTIONS)
    dicts = dataio.PairLoader(pair_tars, captions=CaptionConfig(pad_to_max_length=True), normalize=True, **OPTIONS)
    for batch, whole in zip(loader, dicts, strict=True):
        images, texts = batch
        assert images.shape[1:] == (3, 32, 32) and images.dtype == torch.float32 and texts.shape[1] == 77
        assert torch.equal(images, whole["image"]) and torch.equal(texts, whole["input_ids"])
    assert loader.num_samples == loader.num_samples() == 40 and loader.num_batches == len(loader) == 5


@pytest.mark.parametrize("world, drop_last, total, per_rank, batches", [
    (2, False, 40, 20, 3), (3, False, 42, 14, 2), (2, True, 32, 16, 2), (1, False, 40, 40, 5)])
def test_num_samples_over_ranks(pair_tars, world, drop_last, total, per_rank, batches):
    """40 pairs, batches of 8: ``num_samples`` is what every rank reads together (padding repeats included, short
    batches left out under ``drop_last``), ``rank_samples()`` this rank's share, ``num_batches`` its batches."""
    for rank in range(world):
        loader = dataio.PairLoader(pair_tars, world_size=world, rank=rank, drop_last=drop_last, **OPTIONS)
        assert loader.num_samples == loader.num_samples() == total
        assert loader.rank_samples() == per_rank and loader.num_batches == len(loader) == batches


def test_batch_transform_may_return_the_tuple(pair_tars_text):
    """open_clip tokenising the captions itself, on the batch: its ``(images, texts)`` is passed on."""
    def tokenise(batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        return batch["image"], torch.tensor([[len(c), 1, 0] for c in batch["caption"]])

    loader = dataio.PairLoader(pair_tars_text, batch_transform=tokenise, captions=CaptionConfig(output="tuple"),
                               **OPTIONS)
    images, texts = next(iter(loader))
    assert images.shape == (8, 3, 32, 32) and texts.shape == (8, 3)
    bad = dataio.PairLoader(pair_tars_text, batch_transform=lambda b: (b["image"], b["image"][:2]), **OPTIONS)
    with pytest.raises(ConfigError, match="batch_transform returned input_ids with 2 rows for a batch of 8"):
        next(iter(bad))
    with pytest.raises(ConfigError, match="output='tuple' gives .images, input_ids., and this folder has no stored"):
        next(iter(dataio.PairLoader(pair_tars_text, captions=CaptionConfig(output="tuple"), **OPTIONS)))
    with pytest.raises(ConfigError, match="output must be 'dict' or 'tuple'"):
        CaptionConfig(output="list")


def test_shard_dataset_items_carry_the_stored_ids_77_wide(pair_tars, pair_tars_text):
    rows = table(pair_tars)
    dataset = dataio.ShardDataset(pair_tars, image_size=32)
    item = dataset[5]
    assert item["input_ids"].dtype == torch.int64 and item["input_ids"].shape == (77,)
    stored = rows["input_ids"][5]
    assert item["input_ids"][:len(stored)].tolist() == stored and item["caption"] == rows["caption"][5]
    batch = next(iter(TorchLoader(dataset, batch_size=4)))  # default_collate stacks the fixed-width rows
    assert batch["input_ids"].shape == (4, 77) and len(batch["caption"]) == 4
    assert "input_ids" not in dataio.ShardDataset(pair_tars_text, image_size=32)[5]


def test_the_evaluation_view_is_open_clips_whole_shorter_side(pair_tars):
    loader = dataio.PairLoader(pair_tars, **OPTIONS)
    assert loader.config.val_crop_ratio == 1.0
    whole = dataio.ShardDataset(pair_tars, image_size=32, val_crop_ratio=1.0)
    batch = next(iter(loader))
    for row, sample in enumerate(batch["sample_ids"].tolist()):
        assert torch.equal(batch["image"][row], whole[sample]["image"])
    assert torch.equal(loader.dataset[3]["image"], whole[3]["image"])
    assert dataio.PairLoader(pair_tars, val_crop_ratio=0.875, **OPTIONS).config.val_crop_ratio == 0.875
