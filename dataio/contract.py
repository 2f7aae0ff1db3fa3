"""The output contract of every image loader backend (turbo, DALI), in one place.

A batch is ``(images, labels)``:

- ``images``: ``torch.uint8``, shape ``(N, 3, S, S)`` with ``S = image_size``,
  RGB, values 0-255, in ``torch.channels_last`` memory format (physically
  NHWC, as the decoders write it) unless ``channels_last=False``; on
  ``config.device``. With ``normalize=True``: ``torch.float32``, normalised
  on the device with ``(x / 255 - mean) / std``.
- ``labels``: ``torch.int64``, shape ``(N,)``, class indices in sorted
  class-folder order (``ImageFolder``'s), on ``config.device``.
- ``N == batch_size`` for every batch except the last of an epoch when
  ``drop_last=False``; under the ``skip``/``warn`` error policy a batch can be
  smaller by the samples dropped.
- An epoch yields every sample of the rank's share exactly once, in an order
  fixed by ``(seed, epoch)`` and independent of ``num_workers``.
"""

from __future__ import annotations

import torch

from dataio.image_loader_config import ImageLoaderConfig


def check_batch(images: torch.Tensor, labels: torch.Tensor, config: ImageLoaderConfig) -> None:
    """Raise AssertionError if a batch breaks the contract above."""
    size = config.image_size
    expected_dtype = torch.float32 if config.normalize else torch.uint8
    assert images.dtype == expected_dtype, f"images dtype {images.dtype}, expected {expected_dtype}"
    assert images.ndim == 4 and tuple(images.shape[1:]) == (3, size, size), f"images shape {tuple(images.shape)}"
    assert labels.dtype == torch.int64 and labels.shape == (images.shape[0],), f"labels {labels.dtype} {labels.shape}"
    assert 1 <= images.shape[0] <= config.batch_size, f"batch of {images.shape[0]}"
    if config.channels_last:
        assert images.is_contiguous(memory_format=torch.channels_last), "images not channels_last"
    else:
        assert images.is_contiguous(), "images not contiguous NCHW"
    assert images.device.type == torch.device(config.device).type, f"images on {images.device}"
