"""batch_transform must keep the batch's size on every field: one ConfigError naming the hook, the field and both
sizes, for the image and the text loader (before, a short field was yielded and ``with_ids()`` counted samples
that were not in the batch)."""

from __future__ import annotations

import pytest
import torch

from dataio import ImageLoader, TextLoader
from dataio.formats.errors import ConfigError

OPTIONS = dict(batch_size=8, image_size=32, train=False, num_workers=1)


@pytest.mark.parametrize("hook, field, rows", [
    (lambda images, labels: (images[:-1], labels), "images", 7),
    (lambda images, labels: (images, labels[:-2]), "labels", 6),
    (lambda images, labels: (images, labels.sum()), "labels", None),
], ids=["fewer-images", "fewer-labels", "scalar-labels"])
def test_an_image_hook_that_changes_the_batch_size_is_named(image_shards, hook, field, rows):
    got = "no first dimension" if rows is None else f"{rows} rows"
    expected = f"batch_transform returned {field} with {got} for a batch of 8 samples"
    for view in (lambda loader: loader, lambda loader: loader.with_ids()):
        with ImageLoader(image_shards, batch_transform=hook, **OPTIONS) as loader, \
                pytest.raises(ConfigError, match=expected) as info:
            next(iter(view(loader)))
        assert info.value.parameters == ("batch_transform",)


def test_an_image_hook_that_keeps_the_size_may_change_the_rest(image_shards):
    def soft_labels(images, labels):
        return images[:, :, ::2, ::2].contiguous(), torch.nn.functional.one_hot(labels, 3).float()

    with ImageLoader(image_shards, batch_transform=soft_labels, **OPTIONS) as loader:
        batch = next(iter(loader.with_ids()))
    assert batch.images.shape == (8, 3, 16, 16) and batch.labels.shape == (8, 3) and len(batch.samples) == 8


@pytest.mark.parametrize("mode, field", [("fixed", "input_ids"), ("fixed", "labels"), ("pack", "attention_mask")])
def test_a_text_hook_that_drops_a_row_of_one_field_is_named(text_shards, mode, field):
    options = dict(batch_size=8) if mode == "fixed" else dict(block_size=64, batch_size=4)
    rows = options["batch_size"]

    def short(batch: dict) -> dict:
        return {**batch, field: batch[field][:-1]}

    with TextLoader(text_shards, mode=mode, batch_transform=short, **options) as loader, \
            pytest.raises(ConfigError, match=f"batch_transform returned {field} with {rows - 1} rows for a batch of "
                                             f"{rows} rows") as info:
        next(iter(loader))
    assert info.value.parameters == ("batch_transform",)


def test_a_text_hook_may_add_fields_of_other_sizes(text_shards):
    """Only the loader's row fields are held to the batch's rows: cu_seqlens, or a field the hook adds, are not."""
    def weighted(batch: dict) -> dict:
        return {**batch, "source_weights": torch.ones(3)}

    with TextLoader(text_shards, mode="pack", block_size=64, batch_size=4, batch_transform=weighted) as loader:
        batch = next(iter(loader))
    assert batch["input_ids"].shape[0] == 4 and batch["source_weights"].shape == (3,)
    assert "cu_seqlens" in batch  # its own size (documents + 1), passed on unchecked
