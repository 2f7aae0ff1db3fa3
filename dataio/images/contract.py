"""The output contract of every image loader backend (turbo, DALI), in one place.

A batch is ``(images, labels)``:

- ``images``: ``torch.uint8``, shape ``(N, 3, S, S)`` with ``S = image_size``,
  RGB, values 0-255, in ``torch.channels_last`` memory format (physically
  NHWC, as the decoders write it) unless ``channels_last=False``; on
  ``config.device``. With ``normalize=True``: ``torch.float32``, normalised
  on the device with ``(x / 255 - mean) / std``.
- ``labels``: ``torch.int64``, shape ``(N,)``, class indices in sorted
  class-folder order (``ImageFolder``'s), on ``config.device``. With
  ``config.mix`` (MixUp/CutMix): ``torch.float32`` soft targets of shape
  ``(N, num_classes)`` whose rows sum to one.
- With a resolution ``schedule``, ``S`` and ``batch_size`` are the epoch's (the
  schedule's batch size is the loader's: ``ResolutionSchedule``).
- ``N == batch_size`` for every batch except the last of an epoch when
  ``drop_last=False``; under the ``skip``/``warn`` error policy a batch can be
  smaller by the samples dropped.
- An epoch yields every sample of the rank's share exactly once, in an order
  fixed by ``(seed, epoch)`` and independent of ``num_workers``.
- With ``batch_transform``, the batch is what it returns (it runs last, on
  the batch described above); ``check_batch`` is for batches without it.
- ``dataio.DataLoader`` sets ``normalize=True`` unless told otherwise.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from dataio.images.config import ImageLoaderConfig


class ImageBatch(NamedTuple):
    """A batch with its provenance, from ``ImageLoader.batches()`` (and ``with_ids()``)."""

    images: torch.Tensor  # as above
    labels: torch.Tensor  # (N,) int64, or (N, classes) float soft labels with mix
    samples: np.ndarray  # (N,) int64 global sample ids (rows of the sample table)
    repeated: np.ndarray  # (N,) bool: padding repeats that evaluation should drop


def check_batch(images: torch.Tensor, labels: torch.Tensor, config: ImageLoaderConfig, epoch: int = 0) -> None:
    """Raise AssertionError if a batch of ``epoch`` breaks the contract above."""
    size = config.image_size_at(epoch)
    expected_dtype = torch.float32 if config.normalize else torch.uint8
    assert images.dtype == expected_dtype, f"images dtype {images.dtype}, expected {expected_dtype}"
    assert images.ndim == 4 and tuple(images.shape[1:]) == (3, size, size), f"images shape {tuple(images.shape)}"
    n = images.shape[0]
    if config.mix is None:
        assert labels.dtype == torch.int64 and labels.shape == (n,), f"labels {labels.dtype} {labels.shape}"
    else:
        assert labels.dtype == torch.float32 and labels.shape == (n, config.mix.num_classes), f"targets {labels.shape}"
        assert torch.allclose(labels.sum(1), torch.ones(n, device=labels.device), atol=1e-4), "targets do not sum to 1"
    assert 1 <= n <= config.batch_size_at(epoch), f"batch of {n}"
    if config.channels_last:
        assert images.is_contiguous(memory_format=torch.channels_last), "images not channels_last"
    else:
        assert images.is_contiguous(), "images not contiguous NCHW"
    assert images.device.type == torch.device(config.device).type, f"images on {images.device}"
