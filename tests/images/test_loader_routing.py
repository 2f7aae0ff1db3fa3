"""The image loader's parts each do their own routing: DALI's bisection, the epoch-sized device crop, one Normalize."""

from __future__ import annotations

import numpy as np
import torch

from dataio import ImageLoader
from dataio.augment import EpochSizedCrop, ResolutionSchedule, SeedKey
from dataio.images.dali_decode import DaliDecoder, DaliError


class _FakeDali(DaliDecoder):
    """A decoder whose pipeline fails on every file that starts with b"bad"."""

    def __init__(self) -> None:
        super().__init__(max_batch=16, threads=1, device_id=None)
        self.runs = 0

    def decode(self, encoded, boxes, flipped, size):
        self.runs += 1
        if any(bytes(e[:3]) == b"bad" for e in encoded):
            raise DaliError("Error in thread 0: decoding failed\nnvJPEG: bad data\nC++ context: ...")
        return torch.stack([torch.full((size, size, 3), int(e[0]), dtype=torch.uint8) for e in encoded])


def test_dali_decoder_bisects_a_failing_batch_to_name_each_bad_file():
    files = [np.frombuffer(b"bad" if i in (3, 10) else bytes([i + 1]) * 4, dtype=np.uint8) for i in range(16)]
    decoder = _FakeDali()
    images, failures = decoder.decode_each(files, np.zeros((16, 4)), np.zeros(16, bool), 8)
    assert [position for position, _ in failures] == [3, 10]
    assert all(reason == "DALI: nvJPEG: bad data" for _, reason in failures)
    good = [i for i in range(16) if i not in (3, 10)]
    assert all(int(images[i, 0, 0, 0]) == i + 1 for i in good)
    assert images[[3, 10]].eq(0).all()
    assert decoder.runs < 16  # bisection, not one run per file


def test_epoch_sized_crop_follows_the_schedule():
    schedule = ResolutionSchedule(epochs=4, start_size=64, end_size=128)
    crop = EpochSizedCrop(128, schedule=schedule)
    images = torch.zeros((2, 3, 150, 150))
    for epoch in range(4):
        crop.seed_for(SeedKey(seed=0, epoch=epoch, rank=0, step=0))
        assert crop(images).shape[-1] == schedule.image_size(epoch)


def test_the_loader_builds_one_normalize_for_the_copy_and_the_chain(image_shards):
    loader = ImageLoader(image_shards, batch_size=8, image_size=32, normalize=True, crop_on_device=True)
    assert loader._transfer.normalize is loader._transfer.augment.normalize is not None
    images, _ = next(iter(loader))
    assert images.dtype == torch.float32
    loader.close()
