"""transform= (per sample, uint8 CHW, on the decode threads) and batch_transform= (per batch, on the device, last)."""

from __future__ import annotations

import threading

import pytest
import torch

from dataio import ImageLoader, TextLoader
from dataio.formats.errors import ConfigError

OPTIONS = dict(batch_size=4, image_size=48, train=False, num_workers=2)


def contrast(image: torch.Tensor) -> torch.Tensor:
    """A deterministic contrast change in torch ops: uint8 CHW in, uint8 CHW out."""
    pixels = image.float()
    return ((pixels - pixels.mean()) * 1.5 + pixels.mean()).clamp_(0, 255).to(torch.uint8)


def images_of(loader: ImageLoader) -> list[torch.Tensor]:
    with loader:
        return [images.clone() for images, _ in loader]


def test_transform_runs_on_the_decode_threads_as_if_applied_by_hand(real_photo_shards):
    threads = set()

    def recorded(image: torch.Tensor) -> torch.Tensor:
        threads.add(threading.current_thread().name)
        assert image.dtype == torch.uint8 and image.shape == (3, 48, 48)
        return contrast(image)

    plain = images_of(ImageLoader(real_photo_shards, **OPTIONS))
    hooked = images_of(ImageLoader(real_photo_shards, transform=recorded, **OPTIONS))
    assert threads and all(name.startswith("dataio-decode") for name in threads)
    assert len(hooked) == len(plain) == 4
    for got, batch in zip(hooked, plain, strict=True):
        assert torch.equal(got, torch.stack([contrast(image) for image in batch]))
        assert not torch.equal(got, batch)
    # in place on the view of the slot, or a rearranged view of it: both land in the batch
    inverted = images_of(ImageLoader(real_photo_shards, transform=lambda image: image.bitwise_not_(), **OPTIONS))
    transposed = images_of(ImageLoader(real_photo_shards, transform=lambda image: image.transpose(1, 2), **OPTIONS))
    for inv, tra, batch in zip(inverted, transposed, plain, strict=True):
        assert torch.equal(inv, 255 - batch) and torch.equal(tra, batch.transpose(2, 3))


def test_a_transform_taking_a_generator_draws_the_same_for_any_thread_count(real_photo_shards):
    def noise(image: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        shift = torch.randint(-40, 40, (3, 1, 1), generator=generator)
        return (image.int() + shift).clamp_(0, 255).to(torch.uint8)

    runs = [images_of(ImageLoader(real_photo_shards, transform=noise, **{**OPTIONS, "num_workers": workers}))
            for workers in (0, 1, 2)]
    for batches in runs[1:]:
        assert all(torch.equal(a, b) for a, b in zip(batches, runs[0], strict=True))
    plain = images_of(ImageLoader(real_photo_shards, **OPTIONS))
    shifts = torch.cat([(a.int() - b.int()).flatten(2).median(2).values for a, b in zip(runs[0], plain, strict=True)])
    assert len(set(map(tuple, shifts.tolist()))) > len(shifts) // 2  # a draw per sample, not one for all
    with ImageLoader(real_photo_shards, transform=noise, **OPTIONS) as loader:
        loader.set_epoch(1)
        assert not torch.equal(next(iter(loader))[0], runs[0][0])  # and per epoch


@pytest.mark.parametrize("transform, got", [
    (lambda image: image.float(), "float32 (3, 48, 48)"),
    (lambda image: image[:, :24], "uint8 (3, 24, 48)"),
    (lambda image: image.numpy(), "ndarray"),
])
def test_a_transform_returning_something_else_is_one_line_naming_it_and_the_sample(real_photo_shards, transform, got):
    with ImageLoader(real_photo_shards, transform=transform, **OPTIONS) as loader, \
            pytest.raises(ConfigError) as info:
        list(loader)
    message = str(info.value)
    assert info.value.parameters == ("transform",) and "\n" not in message
    assert message.startswith(f"transform returned {got} for sample '") and " in shard " in message
    assert "uint8 tensor of shape (3, 48, 48)" in message


def test_an_error_of_the_transform_propagates_with_a_note_naming_the_sample(real_photo_shards):
    def broken(image):
        raise RuntimeError("my bug")

    with ImageLoader(real_photo_shards, transform=broken, on_error="skip", **OPTIONS) as loader, \
            pytest.raises(RuntimeError, match="my bug") as info:
        list(loader)  # not a data error: the skip policy does not swallow it
    assert any(note.startswith("dataio: raised by transform= on sample '") for note in info.value.__notes__)


def test_batch_transform_gets_the_batch_after_the_copy_and_normalisation(real_photo_shards):
    seen = []

    def shift(images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seen.append(images.clone())
        return images + 1, labels + 10

    options = {**OPTIONS, "normalize": True}
    with ImageLoader(real_photo_shards, **options) as plain:
        expected = [(images.clone(), labels.clone()) for images, labels in plain]
    with ImageLoader(real_photo_shards, batch_transform=shift, **options) as loader:
        got = [(images, labels) for images, labels in loader]
        assert loader.stats.stages.as_dict()["0"]["batch_transform"]["calls"] == len(expected)
    assert len(got) == len(seen) == len(expected)
    for (images, labels), before, (ref_images, ref_labels) in zip(got, seen, expected, strict=True):
        assert before.dtype == torch.float32 and before.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(before, ref_images)  # what the loader would have yielded: copied, normalised
        assert torch.equal(images, ref_images + 1) and torch.equal(labels, ref_labels + 10)  # its output is yielded


def test_batch_transform_with_a_generator_is_seeded_per_batch(real_photo_shards):
    def dropout(images, labels, generator):
        return images * (torch.rand(images.shape[0], 1, 1, 1, generator=generator) > 0.5), labels

    runs = [images_of(ImageLoader(real_photo_shards, batch_transform=dropout, normalize=True, **OPTIONS))
            for _ in range(2)]
    assert all(torch.equal(a, b) for a, b in zip(*runs, strict=True))
    with pytest.raises(ConfigError, match="batch_transform must return \\(images, labels\\)") as info:
        images_of(ImageLoader(real_photo_shards, batch_transform=lambda images, labels: images, **OPTIONS))
    assert info.value.parameters == ("batch_transform",)


def test_text_batch_transform_runs_on_each_batch_dict(text_shards):
    def lengths(batch: dict) -> dict:
        return {**batch, "lengths": batch["attention_mask"].sum(1)}

    with TextLoader(text_shards, mode="fixed", batch_size=8, batch_transform=lengths) as loader:
        batches = list(loader)
    assert batches and all(torch.equal(b["lengths"], b["attention_mask"].sum(1)) for b in batches)
    with TextLoader(text_shards, mode="fixed", batch_size=8, batch_transform=lambda batch: None) as loader, \
            pytest.raises(ConfigError, match="batch_transform must return the batch dict, got NoneType"):
        next(iter(loader))
