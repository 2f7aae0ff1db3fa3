"""Configuration of ``dataio.ImageLoader``: one frozen, keyword-only dataclass."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral
from typing import Any, Literal

import torch

from dataio.formats.errors import ConfigError
from dataio.formats.fallback_log import warn_once
from dataio.formats.limits import MAX_PIXELS
from dataio.images.dali_install import dali_installed, install_hint
from dataio.augment import MixConfig, RandAugmentConfig, ResolutionSchedule
from dataio.augment.color_jitter import ColorJitterConfig
from dataio.augment.random_erasing import ErasingConfig
from dataio.augment.timm_strings import TimmRandAugmentConfig
from dataio.loader.loader_config import LoaderConfig
from dataio.pipeline.thread_tuner import thread_budget
from dataio.remote.remote_options import DEFAULT_CACHE_LIMIT

IMAGENET_MEAN = (0.485, 0.456, 0.406)
# One output image holds at most the decompression-bomb bound of pixels (no image dataio decodes is larger), and a
# batch at most this many bytes as float32: image_size=(100000, 100000) was built and its first batch (240 GB)
# died in the allocator, or the OOM killer, on a decode thread.
MAX_BATCH_BYTES = 64 << 30
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True, kw_only=True)
class ImageLoaderConfig(LoaderConfig):
    """Every option of the image loader, validated on construction.

    ``image_size`` is a side (S x S outputs) or, for box folders, (height, width)
    (``DetectionLoader``'s rectangular views; the other kinds refuse a pair).

    Train mode does RandomResizedCrop(``crop_scale``, ``crop_ratio``) and a
    horizontal flip with probability ``hflip``; val mode resizes and center
    crops with ratio ``val_crop_ratio``. ``shuffle`` defaults to ``train``.

    Device augmentation (train only): ``randaugment`` (dataio's config, or timm's
    string such as ``"rand-m9-mstd0.5-inc1"``), ``mix``, and timm's
    ``color_jitter`` and random erasing (``re_prob``, of the normalised batch)
    run batched on ``device`` after the copy, in timm's order; ``crop_on_device`` decodes each image whole at
    ``decode_size`` on the host and does the crop and flip on the device (for
    when the CPU is the bottleneck). ``schedule`` sets the resolution (and,
    with ``dynamic_batch``, the batch size) per epoch, overriding
    ``image_size``; there is one batch size: a schedule without ``batch_size``
    takes the loader's (the config holds it filled in), one with its own must
    agree with ``batch_size`` (``ImageLoader`` takes it when ``batch_size`` is
    not given).

    Output: uint8 by default (``normalize=False``), which a float model
    refuses at its first layer (``expected scalar type Byte but found
    Float``): pass ``normalize=True`` for float32 normalised batches, as a
    torchvision pipeline gives (``dataio.DataLoader`` does so by default).

    Mixtures: with a dict of sources, ``weights`` (``{name: weight}``, a schedule
    ``[(position, {name: weight}), ...]`` or a ``WeightSchedule``) blends them,
    exact to one sample at every prefix; an epoch is one pass of every source,
    ``epoch_length`` samples, or until ``epoch_until`` (a source, or "all") has
    finished a pass (``dataio.images.image_mixture``).

    Hooks: ``transform`` runs per sample on the decode threads, on the
    uint8 (3, S, S) crop, returning the same (``dataio.images.sample_transform``);
    ``batch_transform(images, labels) -> (images, labels)`` runs per batch on
    ``device`` after the copy, normalisation and device augmentation, last.

    Image-text pair folders (``dataio index`` of img2dataset tars, ``convert
    images --captions``) yield dicts instead: ``image`` as above, the caption's
    fields as ``captions`` asks (``dataio.pairs.caption_config``), ``sample_ids``
    and ``repeated``; their ``batch_transform`` takes and returns that dict.
    """

    batch_size: int = 256
    image_size: int | tuple[int, int] = 224  # (height, width): rectangular outputs, box folders only (DetectionLoader)
    train: bool = True
    drop_tail: bool | None = None  # DistributedSampler's drop_last: trim, not pad, the uneven tail; None: drop_last
    num_workers: int | Literal["auto"] | None = None  # decode threads; None: one per core; auto: measured
    cpu_budget: int | float | None = None  # auto: cores (int) or share of them (float); None: all but one
    normalize: bool = False  # float output, normalised on the target device
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    channels_last: bool = True
    crop_scale: tuple[float, float] = (0.08, 1.0)
    crop_ratio: tuple[float, float] = (3 / 4, 4 / 3)
    val_crop_ratio: float = 0.875
    hflip: float = 0.5
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None  # per sample, decode threads: uint8 CHW
    batch_transform: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None  # per batch, on device, last
    fast_resize: bool = False  # nearest-neighbour instead of antialiased bilinear
    reduced_decode: bool = True  # JPEG DCT scaling when the crop is downscaled >= 2x
    region_decode: bool = True  # decode only the crop's rows and columns (dataio.formats.jpeg._jpeg_codec)
    prefetch_batches: int = 1  # batches in flight per decode thread (DataLoader's prefetch_factor)
    timeout: float = 0  # > 0: waiting longer than this many seconds for a batch raises (as DataLoader)
    verify_samples: bool = True  # each image's xxh3 against the sample table, on every read (tables since 1.1)
    randaugment: RandAugmentConfig | TimmRandAugmentConfig | str | None = None  # str: timm's "rand-m9-mstd0.5"
    mix: MixConfig | None = None
    color_jitter: float | tuple[float, ...] | None = None  # timm's: ColorJitter strengths, on the device
    color_jitter_prob: float | None = None  # timm's: probability of the jitter per sample (None: always)
    re_prob: float = 0.0  # timm's RandomErasing probability per sample, after normalisation (normalize=True)
    re_mode: Literal["const", "rand", "pixel"] = "const"  # timm's: erase to 0, a normal colour, or normal noise
    re_count: int = 1  # timm's: up to this many boxes per erased sample
    crop_on_device: bool = False
    decode_size: int | None = None  # crop_on_device: host decode size; default image_size * 8 / 7
    schedule: ResolutionSchedule | None = None
    decoder: Literal["auto", "turbo", "dali"] = "auto"  # auto: DALI on a CUDA device, turbo otherwise
    hw_decoder_load: float = 0.65  # DALI on A100/H100: share of images sent to the hardware JPEG decoder
    cache_limit: int = DEFAULT_CACHE_LIMIT  # bytes in cache_dir; least recently used ranges go first
    readahead_batches: int = 4  # batches whose ranges are fetched ahead of the decoders
    readahead_threads: int = 4  # batches fetched at once
    captions: Any = None  # deprecated: dataio.PairLoader's CaptionConfig (ImageLoader over image-text pairs)
    targets: Any = None  # deprecated: dataio.DetectionLoader's DetectionConfig (ImageLoader over boxes)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        self._check_sizes()
        if self.num_workers is not None and self.num_workers != "auto" and (
                isinstance(self.num_workers, (str, bool)) or self.num_workers < 0):
            raise ValueError(f"num_workers must be >= 0 or 'auto', got {self.num_workers!r}")
        if self.cpu_budget is not None and (isinstance(self.cpu_budget, bool) or not (
                (isinstance(self.cpu_budget, int) and self.cpu_budget >= 1)
                or (isinstance(self.cpu_budget, float) and 0 < self.cpu_budget <= 1))):
            raise ValueError(f"cpu_budget must be a core count >= 1 or a share in (0, 1], got {self.cpu_budget!r}")
        if not 0 < self.crop_scale[0] <= self.crop_scale[1] <= 1:
            raise ValueError(f"crop_scale must satisfy 0 < lo <= hi <= 1, got {self.crop_scale}")
        if not 0 < self.crop_ratio[0] <= self.crop_ratio[1]:
            raise ValueError(f"crop_ratio must satisfy 0 < lo <= hi, got {self.crop_ratio}")
        if not 0 < self.val_crop_ratio <= 1:
            raise ValueError(f"val_crop_ratio must be in (0, 1], got {self.val_crop_ratio}")
        if not 0 <= self.hflip <= 1:
            raise ValueError(f"hflip must be a probability, got {self.hflip}")
        if self.prefetch_batches < 1:
            raise ValueError("prefetch_batches must be >= 1")
        if self.timeout < 0:
            raise ValueError(f"timeout must be >= 0 seconds, got {self.timeout}")
        if len(self.mean) != 3 or len(self.std) != 3 or min(self.std) <= 0:
            raise ValueError("mean and std need 3 values, std positive")
        if isinstance(self.randaugment, str):  # timm's RandAugment string (dataio.augment.timm_strings)
            object.__setattr__(self, "randaugment", TimmRandAugmentConfig.from_timm(self.randaugment))
        if not self.train and (self.randaugment or self.mix or self.crop_on_device or self.schedule
                               or self.color_jitter is not None or self.re_prob):
            raise ValueError("randaugment, mix, color_jitter, re_prob, crop_on_device and schedule are for train=True "
                             "loaders")
        _ = self.erasing, self.jitter  # validated here, in one line each
        if isinstance(self.mix, MixConfig):  # its CutMix boxes must fit the smallest size it will mix
            s = self.schedule
            side = min(s.start_size, s.end_size, s.final_size or s.end_size) if s else None
            self.mix.refuse_below_one_pixel(*((side, side) if side else self.output_shape))
        if self.re_prob and not self.normalize:
            raise ConfigError("{0} erases normalised images, as timm does after Normalize: pass normalize=True",
                              "re_prob")
        if self.decoder not in ("auto", "turbo", "dali"):
            raise ValueError(f"decoder must be auto|turbo|dali, got {self.decoder!r}")
        if self.decoder == "dali" and not dali_installed():
            raise ConfigError(f"{{0}} 'dali' needs NVIDIA DALI, which is not installed: {install_hint()}", "decoder")
        if self.decoder == "dali" and self.crop_on_device:
            raise ValueError("crop_on_device is for the turbo decoder (DALI crops while decoding)")
        if not 0 <= self.hw_decoder_load <= 1:
            raise ValueError(f"hw_decoder_load must be in [0, 1], got {self.hw_decoder_load}")
        for name in ("readahead_batches", "readahead_threads"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{{0}} must be >= 1, got {getattr(self, name)}", name)
        if self.decode_size is not None and self.decode_size < 8:
            raise ValueError(f"decode_size must be >= 8, got {self.decode_size}")
        self._check_hooks()
        self._one_batch_size()

    def _one_batch_size(self) -> None:
        """The schedule's batch size is the loader's: filled in when the schedule has none, else checked."""
        schedule = self.schedule
        if schedule is None:
            return
        if schedule.batch_size is None:
            try:
                object.__setattr__(self, "schedule", dataclasses.replace(schedule, batch_size=self.batch_size))
            except ValueError as e:  # below the schedule's batch_multiple with dynamic_batch
                raise ConfigError(f"{{0}} {self.batch_size} does not fit the schedule: {e}", "batch_size") from None
        elif schedule.batch_size != self.batch_size:
            raise ConfigError(f"{{0}}.batch_size is {schedule.batch_size} and the loader's batch_size "
                              f"{self.batch_size}: give the batch size once (a ResolutionSchedule without "
                              "batch_size takes the loader's)", "schedule")

    def _check_sizes(self) -> None:
        """``image_size`` is one int (the side of square crops, as torchvision's ``RandomResizedCrop(224)``) or a
        (height, width) pair of ints, torchvision's ``size=(H, W)``; ``(S, S)`` is kept as ``S``. A pair is read by
        the box kind alone (``rectangular_refused`` for the others) and by no path that crops square windows:
        ``crop_on_device``, DALI and a ``schedule`` (whose sizes are one int) refuse it here in one line."""
        size = self.image_size
        if isinstance(size, (tuple, list)) and len(size) == 2 and all(
                isinstance(side, Integral) and not isinstance(side, bool) for side in size):
            size = (int(size[0]), int(size[1])) if size[0] != size[1] else int(size[0])
            object.__setattr__(self, "image_size", size)
        elif isinstance(size, bool) or not isinstance(size, Integral):
            raise ConfigError(f"{{0}} is one int or a (height, width) pair of ints, got {size!r:.40}", "image_size")
        if min(self.output_shape) < 8:
            raise ValueError(f"image_size must be >= 8, got {self.image_size}")
        pixels = self.output_shape[0] * self.output_shape[1]
        if pixels > MAX_PIXELS or self.batch_size * pixels * 3 * 4 > MAX_BATCH_BYTES:
            raise ConfigError(f"{{0}} {self.image_size} is {pixels:,} pixels an image, a batch of {self.batch_size} is "
                              f"{self.batch_size * pixels * 12 / 2**30:.1f} GiB as float32: at most "
                              f"{MAX_PIXELS:,} pixels an image (the largest image decoded) and "
                              f"{MAX_BATCH_BYTES >> 30} GiB a batch", "image_size")
        decode = self.decode_size
        if decode is not None and (isinstance(decode, bool) or not isinstance(decode, Integral)):
            raise ConfigError(f"{{0}} is one int: the device crop decodes square images (got {decode!r:.40})",
                              "decode_size")
        if isinstance(size, tuple):
            given = [name for name in ("crop_on_device", "schedule") if getattr(self, name)]
            given += ["decoder"] if self.decoder == "dali" else []
            if given:
                raise ConfigError(f"{{0}} {size} (height, width) is decoded by turbo on the host: {given[0]} crops "
                                  "square windows (leave it out, or pass one int)", "image_size")

    @property
    def output_shape(self) -> tuple[int, int]:
        """(height, width) of the output images: ``image_size`` as a pair (a schedule's sizes are square)."""
        size = self.image_size
        return size if isinstance(size, tuple) else (size, size)

    def rectangular_refused(self, what: str) -> None:
        """Raise a one-line ConfigError when ``image_size`` is a (height, width) pair: ``what`` (a kind's crops) are
        square; box folders (``DetectionLoader``) take the pair."""
        if isinstance(self.image_size, tuple):
            raise ConfigError(f"{{0}} {self.image_size} (height, width) is for box folders (DetectionLoader): "
                              f"{what} are square; pass one int", "image_size")

    def _check_hooks(self) -> None:
        for name in ("transform", "batch_transform"):
            hook = getattr(self, name)
            if hook is not None and not callable(hook):
                raise ConfigError(f"{{0}} must be a callable, got {type(hook).__name__}", name)
        if self.transform is not None and self.crop_on_device:
            raise ConfigError("{0} runs on the host crop, but crop_on_device crops on the device: "
                              "use batch_transform= instead", "transform")
        if self.transform is not None and self.decoder == "dali":
            raise ConfigError("{0} runs on the turbo decoder's threads; decoder='dali' decodes on the GPU: "
                              "use batch_transform= or decoder='turbo'", "transform")

    @property
    def resolved_decoder(self) -> str:
        """'dali' or 'turbo': ``auto`` picks DALI when the loader's device is an available GPU, DALI is installed,
        and no ``transform`` asks for the host crop."""
        if self.decoder != "auto":
            return self.decoder
        if (self.crop_on_device or self.transform is not None or not self.device.startswith("cuda")
                or not torch.cuda.is_available()):
            return "turbo"
        if not dali_installed():
            warn_once("auto-decoder-turbo", f"decoder='auto' on {self.device} decodes on the CPU (turbo): NVIDIA "
                                            f"DALI is not installed; for nvJPEG: {install_hint()}")
            return "turbo"
        return "dali"

    @property
    def erasing(self) -> ErasingConfig | None:
        """timm's RandomErasing of ``re_prob``, ``re_mode``, ``re_count`` (``max_count``, as timm's loader)."""
        if not self.re_prob:
            return None
        return ErasingConfig(probability=self.re_prob, mode=self.re_mode, max_count=self.re_count)

    @property
    def jitter(self) -> ColorJitterConfig | None:
        """The colour jitter of ``color_jitter`` and ``color_jitter_prob`` (timm's arguments)."""
        if self.color_jitter is None:
            return None
        return ColorJitterConfig.from_timm(self.color_jitter, self.color_jitter_prob)

    @property
    def device_augments(self) -> bool:
        """Whether batches go through ``augment.DeviceAugment`` after the copy."""
        return bool(self.randaugment or self.mix or self.crop_on_device or self.color_jitter is not None
                    or self.re_prob)

    def image_size_at(self, epoch: int) -> int:
        """Output resolution of ``epoch`` (a square side; ``output_shape_at`` for a (height, width) pair)."""
        return self.schedule.image_size(epoch) if self.schedule else self.output_shape[1]

    def output_shape_at(self, epoch: int) -> tuple[int, int]:
        """(height, width) of ``epoch``'s output images."""
        return (self.image_size_at(epoch),) * 2 if self.schedule else self.output_shape

    def batch_size_at(self, epoch: int) -> int:
        """Batch size of ``epoch``."""
        return self.schedule.batch_size_at(epoch) if self.schedule else self.batch_size

    def decode_size_at(self, epoch: int) -> int:
        """Side of the host decode: the output size, or the whole-image size for ``crop_on_device``."""
        if not self.crop_on_device:
            return self.image_size_at(epoch)
        return self.decode_size or -(-self.image_size_at(epoch) * 8 // 7 // 8) * 8

    @property
    def drops_tail(self) -> bool:
        """Whether the samples that do not divide among the ranks are dropped rather than padded by repetition.

        ``drop_tail`` (a ``DistributedSampler``'s ``drop_last``), or ``drop_last``
        when it is None: without a sampler, ``drop_last`` alone gives every rank
        only full batches of distinct samples (one process: torch's meaning).
        """
        return self.drop_last if self.drop_tail is None else self.drop_tail

    @property
    def shuffles(self) -> bool:
        """Whether epochs are shuffled: ``shuffle``, or ``train`` when it is None."""
        return self.train if self.shuffle is None else self.shuffle

    @property
    def auto_threads(self) -> bool:
        """Whether the decode thread count is measured (``num_workers="auto"``)."""
        return self.num_workers == "auto"

    @property
    def threads(self) -> int:
        """Decode threads started (0 means decode in the calling thread); with auto, the budget's most."""
        if self.auto_threads:
            return thread_budget(self.cpu_budget)
        return os.cpu_count() or 1 if self.num_workers is None else self.num_workers


def one_batch_size(options: dict[str, Any], config: ImageLoaderConfig | None) -> dict[str, Any]:
    """The constructor's ``options`` with one batch size: a ``schedule=`` with its own ``batch_size`` gives the
    loader's when ``batch_size`` is not given (nor a ``config=``), and a ``batch_size=`` over a ``config=``
    whose schedule follows its batch size carries that schedule along."""
    schedule = options.get("schedule")
    if schedule is not None and schedule.batch_size is not None and "batch_size" not in options and config is None:
        return {**options, "batch_size": schedule.batch_size}
    if "batch_size" in options and "schedule" not in options and config is not None and config.schedule is not None:
        return {**options, "schedule": dataclasses.replace(config.schedule, batch_size=None)}
    return options
