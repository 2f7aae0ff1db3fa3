"""How ``dataio train`` picks its task, and the pair loaders of ``--task clip``: what they read and what they refuse,
each in one message naming the folder and the flag (in process; the CLI's lines are in test_cli_failures)."""

from __future__ import annotations

import pytest
import torch

from dataio.formats.errors import ConfigError
from dataio.train.config import TrainConfig
from dataio.train.pair_loaders import CLIP_CROP_SCALE, OPENAI_MEAN, pair_loaders
from dataio.train.task_choice import chosen_task

CPU = torch.device("cpu")


def test_auto_picks_clip_for_pair_folders_lm_for_text_models_and_classify_for_classes(pair_tars, image_shards):
    assert chosen_task(TrainConfig(train=pair_tars)) == "clip"
    assert chosen_task(TrainConfig(train={"a": pair_tars, "b": pair_tars}, weights={"a": 1, "b": 1})) == "clip"
    assert chosen_task(TrainConfig(train=image_shards)) == "classify"
    assert chosen_task(TrainConfig(train=image_shards, model="tiny_gpt")) == "lm"


@pytest.mark.parametrize("options, words", [
    (dict(train="pairs", task="classify"), ["{0} classify trains on images with classes", "holds image-text pairs",
                                            "--task clip"]),
    (dict(train="classes", task="clip"), ["{0} clip trains on image-text pairs", "classes", "`dataio index`"]),
    (dict(train="pairs", val={"web": "pairs", "imagenet": "classes"}),
     ["{0} ", "validation set imagenet holds images with classes"]),
    (dict(train="pairs", task="clip", model="tiny_gpt"), ["{0} clip trains an image model", "tiny_gpt"]),
    (dict(train="pairs", task="lm"), ["{0} lm trains a text model", "small_cnn"]),
    (dict(train="classes", tokenizer="tok.json"), ["{0} tokenises the captions of --task clip", "classify"]),
], ids=["classify-pairs", "clip-classes", "clip-val-classes", "clip-text-model", "lm-image-model", "tokenizer-classify"])
def test_a_task_the_data_cannot_feed_is_refused_before_any_loader_starts(pair_tars, image_shards, options, words):
    folders = {"pairs": pair_tars, "classes": image_shards}
    resolved = {key: ({k: folders[v] for k, v in value.items()} if isinstance(value, dict) else folders.get(value, value))
                for key, value in options.items()}
    with pytest.raises(ConfigError) as caught:
        chosen_task(TrainConfig(**resolved))
    for word in words:
        assert word in caught.value.template, (word, caught.value.template)
    assert caught.value.parameters[0] in ("task", "val", "tokenizer")


def test_the_pair_loaders_read_with_open_clip_crops_and_normalisation(pair_tars):
    made = pair_loaders(TrainConfig(train=pair_tars, val=pair_tars, task="clip", image_size=32, batch_size=8,
                                    context_length=12, num_workers=1), CPU)
    try:
        assert made.train.config.crop_scale == CLIP_CROP_SCALE and made.train.config.hflip == 0 and made.train.config.mean == OPENAI_MEAN
        assert made.vocab_size == 320 and made.context_length == 12 and made.tally is None
        batch = next(iter(made.val["val"]))
        assert batch["image"].shape == (8, 3, 32, 32) and batch["image"].dtype == torch.float32
        assert batch["input_ids"].shape[1] <= 12 and batch["attention_mask"].shape == batch["input_ids"].shape
    finally:
        for loader in (made.train, *made.val.values()):
            loader.close()


def test_captions_without_ids_are_refused_unless_a_tokenizer_reads_them(pair_tars, pair_tars_text):
    with pytest.raises(ConfigError, match="holds captions without token ids") as caught:
        pair_loaders(TrainConfig(train=pair_tars_text, task="clip", num_workers=1), CPU)
    assert caught.value.parameters == ("tokenizer",) and str(pair_tars_text) in str(caught.value)
    with pytest.raises(ConfigError, match=r"validation set val \(.*\) holds captions without token ids"):
        pair_loaders(TrainConfig(train=pair_tars, val=pair_tars_text, task="clip", num_workers=1), CPU)
    made = pair_loaders(TrainConfig(train=pair_tars_text, val=pair_tars, task="clip", image_size=32, batch_size=4,
                                    tokenizer=pair_tars / "tokenizer.json", num_workers=1), CPU)
    try:  # tokenised on the decode threads, as the stored ids were at pack time
        read = next(iter(made.train))
        stored = {int(i): row for i, row in zip(read["sample_ids"], read["input_ids"], strict=True)}
        made.val["val"].set_epoch(0)
        for batch in made.val["val"]:
            for i, row in zip(batch["sample_ids"], batch["input_ids"], strict=True):
                if int(i) in stored:
                    width = min(len(row), len(stored[int(i)]))
                    assert torch.equal(row[:width], stored[int(i)][:width])
        assert made.vocab_size == 320
    finally:
        for loader in (made.train, *made.val.values()):
            loader.close()
