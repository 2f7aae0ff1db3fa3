"""``dataio.ImageLoader``: a drop-in replacement for ``DataLoader(ImageFolder(...))``.

Reads the classification folders written by ``dataio convert images``: the image kinds' face
(``kind_loader``) with classification's keywords, yielding ``(images, labels)``. The output contract is in
``dataio.images.contract``. Image-text pair and box folders have faces of their own (``dataio.PairLoader``,
``dataio.DetectionLoader``); ``ImageLoader`` still reads them, as it did before they moved (``captions=``,
``targets=``), with a deprecation line.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import torch

from dataio.augment import MixConfig, RandAugmentConfig, ResolutionSchedule
from dataio.augment.timm_strings import TimmRandAugmentConfig
from dataio.formats.errors import ConfigError
from dataio.formats.kinds import KINDS, Kind, kind_of
from dataio.images.config import IMAGENET_MEAN, IMAGENET_STD, ImageLoaderConfig, one_batch_size
from dataio.images.contract import ImageBatch
from dataio.images.image_shards import ImageShards
from dataio.images.kind_loader import IMAGE_FIELDS as FIELDS, ImageKindLoader
from dataio.loader.dataloader_args import constructor_defaults, given_options, keyword_checked
from dataio.pipeline.error_policy import ErrorPolicy
from dataio.remote.remote_options import DEFAULT_CACHE_LIMIT
from dataio.sampling.partition import DEFAULT_WINDOW

DEFAULTS = constructor_defaults(ImageLoaderConfig)  # the constructor's keywords and their defaults
FACE = ImageKindLoader.face  # what it honours of DataLoader's keywords (num_workers = decode threads); FIELDS: its own
# The kinds ImageLoader read before they had faces of their own: still read, with a deprecation line naming the face
# and the keyword their options moved to (a folder of another kind is refused, naming its face).
MOVED = {"pairs": "captions", "detection": "targets"}


class ImageLoader(ImageKindLoader):
    """Iterate ``(images, labels)`` batches over an image shard folder.

    ``ImageLoader(folder, batch_size=256, image_size=224, train=True, ...)``
    takes the fields of :class:`ImageLoaderConfig` as keywords, or a
    ``config=``. Each ``for`` pass is one epoch; the epoch advances by itself
    after a full pass, or is set with ``set_epoch``. ``batches()`` yields
    ``ImageBatch`` with sample ids and padding flags; ``state_dict()`` resumes
    mid-epoch, on the same or another world size. Every keyword of
    ``torch.utils.data.DataLoader`` is honoured, mapped or refused
    (``dataio.loader.dataloader_args``). A folder of image-text pairs or of boxes is read by its own face
    (``dataio.PairLoader``, ``dataio.DetectionLoader``); here, with a deprecation line (``captions=``,
    ``targets=``: those faces' options).
    """

    @keyword_checked
    def __init__(self, source: str | Path | Mapping[str, str | Path], config: ImageLoaderConfig | None = None, *,
                 batch_size: int = 256,
                 image_size: int | tuple[int, int] = 224,  # (H, W): box folders (DetectionLoader) only
                 train: bool = True,
                 shuffle: bool | None = None,
                 seed: int = 0,
                 drop_last: bool = False,
                 drop_tail: bool | None = None,
                 even_batches: bool = True,
                 num_workers: int | Literal["auto"] | None = None,
                 cpu_budget: int | float | None = None,
                 pin_memory: bool = False,
                 device: str = "cpu",
                 normalize: bool = False,
                 mean: tuple[float, float, float] = IMAGENET_MEAN,
                 std: tuple[float, float, float] = IMAGENET_STD,
                 channels_last: bool = True,
                 crop_scale: tuple[float, float] = (0.08, 1.0),
                 crop_ratio: tuple[float, float] = (3 / 4, 4 / 3),
                 val_crop_ratio: float = 0.875,
                 hflip: float = 0.5,
                 transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 batch_transform: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None,
                 fast_resize: bool = False,
                 reduced_decode: bool = True,
                 region_decode: bool = True,
                 prefetch_batches: int = 1,
                 timeout: float = 0,
                 on_error: ErrorPolicy | str = ErrorPolicy.RAISE,
                 max_errors: int | None = None,
                 verify_checksums: bool = False,
                 verify_samples: bool = True,
                 world_size: int | None = None,
                 rank: int | None = None,
                 shard: bool | None = True,
                 shuffle_window: int = DEFAULT_WINDOW,
                 randaugment: RandAugmentConfig | TimmRandAugmentConfig | str | None = None,
                 mix: MixConfig | None = None,
                 color_jitter: float | tuple[float, ...] | None = None,
                 color_jitter_prob: float | None = None,
                 re_prob: float = 0.0,
                 re_mode: Literal["const", "rand", "pixel"] = "const",
                 re_count: int = 1,
                 crop_on_device: bool = False,
                 decode_size: int | None = None,
                 schedule: ResolutionSchedule | None = None,
                 decoder: Literal["auto", "turbo", "dali"] = "auto",
                 hw_decoder_load: float = 0.65,
                 storage_options: Mapping[str, Any] | None = None,
                 cache_dir: str | Path | None = None,
                 cache_limit: int = DEFAULT_CACHE_LIMIT,
                 retries: int = 4,
                 retry_backoff: float = 0.2,
                 remote_timeout: float = 20.0,
                 readahead_batches: int = 4,
                 readahead_threads: int = 4,
                 captions: Any = None,
                 profile: bool = False,
                 weights: Any = None,
                 epoch_length: int | None = None,
                 epoch_until: str | None = None,
                 sampler: Any = None,
                 batch_sampler: Any = None,
                 collate_fn: Any = None,
                 worker_init_fn: Any = None,
                 multiprocessing_context: Any = None,
                 generator: torch.Generator | None = None,
                 prefetch_factor: int | None = None,
                 persistent_workers: bool | None = None,
                 pin_memory_device: str = "",
                 in_order: bool | None = None,
                 targets: Any = None) -> None:
        """Open the shard folder (or URL) ``source`` (a dict ``{name: folder or URL}`` with ``weights`` is a
        mixture, ``dataio.images.image_mixture``); every keyword is a field of :class:`ImageLoaderConfig`
        (documented there, one line each) or one of ``torch.utils.data.DataLoader``'s.

        ``config=`` gives them all at once; a keyword then replaces that field (one passed with its default value
        leaves the config's). DataLoader's keywords are honoured, mapped or refused in one line (``dataio.loader.
        dataloader_args``): ``sampler`` (a ``DistributedSampler`` gives rank, world size, shuffle, seed and its
        ``drop_last``), ``prefetch_factor`` (``prefetch_batches``), ``generator`` (the seed), ``persistent_workers``
        /``in_order`` (accepted), ``pin_memory_device``; the others are refused, saying what to use instead.
        """
        self._build(source, one_batch_size(given_options(locals(), DEFAULTS), config), config)

    def _read_as(self, shards: ImageShards, config: ImageLoaderConfig) -> tuple[Kind, Any]:
        """Classification; a pair or box folder (or ``captions=``/``targets=``) as before, with a deprecation line."""
        asked = next((kind for kind, keyword in MOVED.items() if getattr(config, keyword) is not None), None)
        kind = KINDS[asked] if asked else kind_of(shards.manifest)
        face = kind.part("face")
        if face is ImageLoader or kind.plain:  # images alone (a views folder: its labels -1), as classification
            return KINDS["classification"], None
        keyword = MOVED.get(kind.name)
        if keyword is None:
            raise ConfigError(f"{{0}} {shards.folder} holds {kind.what}, which ImageLoader does not read: read it "
                              f"with dataio.{face.__name__}", "source")
        options = getattr(config, keyword)
        expected = kind.part("options")
        if options is not None and not isinstance(options, expected):
            raise ConfigError(f"{{0}} must be a {expected.__name__}, got {type(options).__name__}", keyword)
        # FutureWarning, not DeprecationWarning: Python shows the latter only for calls made from __main__, and a
        # script's own modules (a DataModule) would never see it
        warnings.warn(f"ImageLoader over {kind.what} is deprecated: read {shards.folder} with "
                      f"dataio.{face.__name__}(..., {keyword}=...)", FutureWarning, stacklevel=5)
        return kind, options

    def batches(self) -> Iterator[ImageBatch]:  # type: ignore[override]
        """One pass (an epoch, or its rest after a resume) of ``ImageBatch``: images, labels, sample ids and padding
        flags (``ImageKindLoader.batches``)."""
        return super().batches()

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return super().__iter__()
