"""``dataio.ShardDataset``: an image shard folder as a map-style ``torch.utils.data.Dataset``.

For scripts that build a sampler from a data set before the loader exists
(``DistributedSampler(train_dataset)``), or whose per-sample transforms dataio
does not implement: ``len``, ``classes``, ``class_to_idx``, ``targets`` come
from the manifest and the sample table (no scan of image files), and
``dataset[i]`` is ``(image, label)``:

- by default the whole image as a uint8 ``(3, H, W)`` tensor (what
  torchvision v2 transforms take), decoded by dataio's libjpeg-turbo codec;
  ``to_pil=True`` gives a PIL RGB image for PIL-only transforms (one that
  refuses the tensor, as torchvision v1's ``ToTensor`` does, is given PIL
  images, with a hint: ``dataio.images.pil_transform``);
- another kind's ``dataset[i]`` is that kind's item (``dataio.formats.kinds``): an image-text pair
  folder's a dict of ``image``, ``caption`` and ``key`` (``dataio.pairs.pair_item``), a box folder's a
  dict of the image and its targets (``dataio.detection.detection_sample``);
- with ``image_size``, the loader's eval view: resized and centre-cropped to
  ``image_size`` exactly as ``ImageLoader(train=False)`` does, float and
  normalised with ``normalize=True``. ``ImageLoader.dataset`` is this view for
  its loader, so ``Subset(loader.dataset, ...)`` in a torch DataLoader stacks
  with the loader's batches.

Every read is checked against the sample table's checksum, as the loader's
are; bad samples follow ``on_error`` (``dataio.loader.map_style_errors``).
Any folder ``ImageLoader`` reads works (converted tars, ``--format arrow``,
``dataio index``ed tars, merged rank folders, URLs): the shards are read
through ``ImageShards``, as the loader's batches are. It is opened in the
process that builds the data set (so a bad source is named at once) and again,
lazily, in each process that reads a sample: the pickled data set holds the
source, options and transforms only (a few hundred bytes), so DataLoader
workers work with fork and spawn alike, as do ``Subset``, ``ConcatDataset``,
Lightning and Accelerate. A worker checks that the manifest is still the one
the data set was built on.
"""

from __future__ import annotations

import dataclasses
import operator
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dataio.formats.errors import ConfigError, ShardError
from dataio.formats.jpeg.cpu_tier import carried_tier, take_tier
from dataio.formats.kinds import Kind, kind_of
from dataio.formats.remote.storage import is_remote, redact
from dataio.images.config import IMAGENET_MEAN, IMAGENET_STD, ImageLoaderConfig
from dataio.images.image_shards import ImageShards
from dataio.images.pil_transform import hint, pil_only, transform_sample
from dataio.pipeline.error_policy import ErrorPolicy, ErrorStats
from dataio.loader.dataloader_args import given_options, keyword_checked
from dataio.loader.map_style_errors import read_or_stand_in
from dataio.remote.remote_options import DEFAULT_CACHE_LIMIT, held_options

_open_lock = threading.Lock()  # one open at a time per process (threads may index the data set at once)


def _new_lock_in_child() -> None:
    """A forked child gets a fresh lock: one held by another thread at the fork would never be released."""
    global _open_lock
    _open_lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_child)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShardDatasetConfig:
    """Options of ``ShardDataset``; the names shared with ``ImageLoaderConfig`` mean the same there."""

    image_size: int | tuple[int, int] | None = None  # None: whole images; else the loader's eval view; (H, W): boxes
    val_crop_ratio: float = 0.875
    normalize: bool = False  # float32 (x / 255 - mean) / std, as the loader's normalize=True
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    to_pil: bool = False  # a PIL RGB image instead of a uint8 (3, H, W) tensor
    fast_resize: bool = False  # eval view: as the loader's
    reduced_decode: bool = True
    region_decode: bool = True
    on_error: ErrorPolicy = ErrorPolicy.RAISE  # skip/warn: a stand-in sample (dataio.loader.map_style_errors)
    max_errors: int | None = None
    verify_samples: bool = True  # each image's xxh3 against the sample table, on every read
    verify_checksums: bool = False  # each shard's sha256, once, when the data set is built
    storage_options: Mapping[str, Any] | None = None  # as the loader's: per URL prefix, never printed
    cache_dir: str | Path | None = None
    cache_limit: int = DEFAULT_CACHE_LIMIT
    retries: int = 4
    retry_backoff: float = 0.2
    targets: Any = None  # a folder with boxes: its DetectionConfig (the eval view's crop, min_visible, masks)

    def __post_init__(self) -> None:
        object.__setattr__(self, "on_error", ErrorPolicy(self.on_error))
        object.__setattr__(self, "storage_options", held_options(self.storage_options))
        if self.to_pil and self.normalize:
            raise ConfigError("{0} gives uint8 PIL images, {1} float tensors: choose one", "to_pil", "normalize")
        reader = self.reader_config()  # the fields shared with the loader, validated as the loader does
        if self.image_size is not None:  # as the loader holds it: (S, S) as S, a (height, width) list as a tuple
            object.__setattr__(self, "image_size", reader.image_size)

    def reader_config(self, verify_checksums: bool = False) -> ImageLoaderConfig:
        """The config of the private reader: one rank, no threads, no batches of its own."""
        return ImageLoaderConfig(
            batch_size=1, train=False, shuffle=False, num_workers=0, world_size=1, rank=0, decoder="turbo",
            image_size=self.image_size or 224, val_crop_ratio=self.val_crop_ratio, mean=self.mean, std=self.std,
            fast_resize=self.fast_resize, reduced_decode=self.reduced_decode, region_decode=self.region_decode,
            on_error=self.on_error, max_errors=self.max_errors, verify_samples=self.verify_samples,
            verify_checksums=verify_checksums, storage_options=self.storage_options, cache_dir=self.cache_dir,
            cache_limit=self.cache_limit, retries=self.retries, retry_backoff=self.retry_backoff)


DATASET_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ShardDatasetConfig)}
FIELDS = frozenset(f.name for f in dataclasses.fields(ShardDatasetConfig))
LOADER_FIELDS = FIELDS & frozenset(f.name for f in dataclasses.fields(ImageLoaderConfig))


class ShardDataset(torch.utils.data.Dataset):
    """``ShardDataset(folder_or_url, transform=None, target_transform=None, **options)``: ``dataset[i]`` is
    ``(image, label)``; the options are the fields of :class:`ShardDatasetConfig` (or ``config=``)."""

    @keyword_checked
    def __init__(self, source: str | Path, transform: Callable | None = None,
                 target_transform: Callable | None = None, *, config: ShardDatasetConfig | None = None,
                 image_size: int | tuple[int, int] | None = None,
                 val_crop_ratio: float = 0.875,
                 normalize: bool = False,
                 mean: tuple[float, float, float] = IMAGENET_MEAN,
                 std: tuple[float, float, float] = IMAGENET_STD,
                 to_pil: bool = False,
                 fast_resize: bool = False,
                 reduced_decode: bool = True,
                 region_decode: bool = True,
                 on_error: ErrorPolicy | str = ErrorPolicy.RAISE,
                 max_errors: int | None = None,
                 verify_samples: bool = True,
                 verify_checksums: bool = False,
                 storage_options: Mapping[str, Any] | None = None,
                 cache_dir: str | Path | None = None,
                 cache_limit: int = DEFAULT_CACHE_LIMIT,
                 retries: int = 4,
                 retry_backoff: float = 0.2,
                 targets: Any = None) -> None:
        """A map-style data set over ``source``; the keywords are :class:`ShardDatasetConfig`'s fields (one line
        each there), ``config=`` gives them at once (a keyword then replaces that field)."""
        options = given_options(locals(), DATASET_DEFAULTS)
        self._setup(source, transform, target_transform, dataclasses.replace(config or ShardDatasetConfig(),
                                                                             **options))
        reader = self._reader(verify_checksums=self.config.verify_checksums)  # a bad source is named here
        self._num_samples, self._fingerprint = len(reader.table), reader.manifest.fingerprint()
        if not self._item_of(reader).takes_target_transform and target_transform is not None:
            raise ConfigError("{0} applies to a label; a sample with boxes is one dict: give transform=", "target_transform")
        if transform is not None and not (self.config.to_pil or self.config.normalize) and pil_only(transform):
            self._pil_input = True
            hint(transform, "takes PIL images (torchvision v1)")

    def _setup(self, source: str | Path | dict[str, str | Path], transform: Callable | None,
               target_transform: Callable | None, config: ShardDatasetConfig) -> None:
        self.source = source if isinstance(source, (str, dict)) else Path(source)
        self.transform, self.target_transform, self.config = transform, target_transform, config
        self.errors = ErrorStats(max_errors=config.max_errors)  # skip/warn: this process's bad samples
        self._opened: tuple[int, ImageShards, bool] | None = None  # (pid, reader, whether this data set owns it)
        self._num_samples, self._fingerprint = 0, ""
        self._pil_input = False  # the transform takes PIL images only (dataio.images.pil_transform)
        self._kind: tuple[Kind, Any] | None = None  # the kind read as, and its options (None: the folder's declared)
        self._item: tuple[ImageShards, Any] | None = None  # the kind's item reader, per reader

    @classmethod
    def over_shards(cls, shards: ImageShards, c: ImageLoaderConfig, image_size: int | tuple[int, int], *, kind: Kind,
                    options: Any) -> "ShardDataset":
        """A loader's eval view (``ImageLoader.dataset``), reading through its ``shards`` in this process, as the
        loader's ``kind`` with its ``options``."""
        config = ShardDatasetConfig(
            image_size=image_size, val_crop_ratio=c.val_crop_ratio, normalize=c.normalize, mean=c.mean,
            std=c.std, fast_resize=c.fast_resize, reduced_decode=c.reduced_decode, region_decode=c.region_decode,
            on_error=c.on_error, max_errors=c.max_errors, verify_samples=c.verify_samples,
            storage_options=c.storage_options, cache_dir=c.cache_dir, cache_limit=c.cache_limit, retries=c.retries,
            retry_backoff=c.retry_backoff)
        dataset = cls.__new__(cls)
        dataset._setup(shards.source_of(), None, None, config)
        dataset._kind = (kind, options)
        dataset._opened = (os.getpid(), shards, False)
        dataset._num_samples, dataset._fingerprint = len(shards.table), shards.manifest.fingerprint()
        return dataset

    # -- opened lazily, once per process --------------------------------------------------
    def _reader(self, verify_checksums: bool = False) -> ImageShards:
        """This process's reader: opened on first use here (after a fork or an unpickling too)."""
        opened = self._opened
        if opened is not None and opened[0] == os.getpid() and not opened[1].closed:
            return opened[1]
        with _open_lock:
            opened = self._opened
            if opened is not None and opened[0] == os.getpid() and not opened[1].closed:
                return opened[1]
            config = self.config.reader_config(verify_checksums)
            if isinstance(self.source, dict):  # a mixture's sources end to end, read by index: any weights do
                config = dataclasses.replace(config, weights=dict.fromkeys(self.source, 1.0))
            reader = ImageShards.open(self.source, config)
            if self._fingerprint and reader.manifest.fingerprint() != self._fingerprint:
                reader.close()
                raise ShardError(str(reader.folder), "changed since the ShardDataset was built (its manifest differs):"
                                                     " build the data set again")
            self._opened = (os.getpid(), reader, True)
            return reader

    def __getstate__(self) -> dict[str, Any]:
        """Source, options and transforms: no open files, memory maps or table (each process opens its own)."""
        return {"source": self.source, "transform": self.transform,
                "target_transform": self.target_transform, "config": self.config,
                "num_samples": self._num_samples, "fingerprint": self._fingerprint, "pil_input": self._pil_input,
                "cpu_tier": carried_tier()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._setup(state["source"], state["transform"], state["target_transform"], state["config"])
        self._num_samples, self._fingerprint = state["num_samples"], state["fingerprint"]
        self._pil_input = state.get("pil_input", False)
        take_tier(state.get("cpu_tier"))  # a spawned worker resizes at the tier its parent was capped at

    def close(self) -> None:
        """Close the shard files this data set opened in this process (they reopen on the next read)."""
        opened, self._opened = self._opened, None
        if opened is not None and opened[2] and opened[0] == os.getpid():
            opened[1].close()

    # -- ImageFolder's surface ------------------------------------------------------------
    def __len__(self) -> int:
        return self._num_samples

    @property
    def classes(self) -> tuple[str, ...]:
        return self._reader().manifest.classes

    @property
    def category_ids(self) -> tuple[int, ...] | None:
        """A COCO folder's category id of each label; None for other folders (``dataio.detection.detection_facts``)."""
        reader = self._reader()
        return self._kind_of(reader)[0].part("facts")(reader, self._item_of(reader)).category_ids

    @property
    def class_to_idx(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.classes)}

    @property
    def targets(self) -> list[int]:
        """The label of every sample, in sample order (as ``ImageFolder.targets``); -1 for samples without a class
        (image-text pairs, boxes, views)."""
        table = self._reader().table
        return [-1] * len(table) if table.label is None else table.label.astype(np.int64).tolist()

    def __getitem__(self, index: int) -> tuple[Any, Any] | dict[str, Any]:
        """(image, label) of sample ``index`` (negative from the end), transformed, or another kind's item (an
        image-text pair's dict, a sample with boxes); IndexError past the end."""
        index = operator.index(index)
        if not -len(self) <= index < len(self):
            raise IndexError(f"sample {index} is not in 0..{len(self) - 1}")
        reader = self._reader()
        item = self._item_of(reader)
        sample = read_or_stand_in(item, lambda i, e: reader.sample_error(i, f"{type(e).__name__}: {e}"),
                                  index % len(self), len(self), self.config.on_error, self.errors)
        return item.transformed(sample, self)

    def transformed_image(self, image: Any) -> Any:
        """``image`` through ``transform`` (given PIL images if it takes only those: ``dataio.images.pil_transform``)."""
        if self.transform is None:
            return image
        image, self._pil_input = transform_sample(self.transform, image, self._pil_input)
        return image

    def _kind_of(self, reader: ImageShards) -> tuple[Kind, Any]:
        """The kind the data set reads (a loader's, or its folder's declared kind) and its options."""
        if self._kind is not None:
            return self._kind
        return kind_of(reader.manifest), self.config.targets  # the one kind option a data set takes (boxes')

    def _item_of(self, reader: ImageShards) -> Any:
        """The kind's item reader over ``reader`` (``dataio.formats.kinds``), made once per reader."""
        if self._item is None or self._item[0] is not reader:
            kind, options = self._kind_of(reader)
            self._item = (reader, kind.part("item")(reader, self.config, options))
        return self._item[1]

    # -- dataio.DataLoader(ShardDataset(...)) ---------------------------------------------
    @property
    def custom_transform(self) -> bool:
        """Whether samples go through the user's code (a transform, or PIL images): torch's DataLoader reads
        such a data set; without, ``dataio.DataLoader`` runs the threaded ``ImageLoader`` over its source."""
        return self.transform is not None or self.target_transform is not None or self.config.to_pil

    def loader_source(self) -> str | Path | dict[str, str | Path]:
        """What ``ImageLoader`` reads for this data set."""
        return self.source

    def item_kind(self) -> str:
        """The kind whose loader reads this data set as its items are (a views folder's: classification's eval
        view, labels -1), for ``dataio.DataLoader(ShardDataset(...))``."""
        return self._item_of(self._reader()).kind

    def loader_options(self) -> dict[str, Any]:
        """This data set's options that are ``ImageLoader``'s too, where they differ from the defaults
        (storage options, error policy, checks, image size and normalisation)."""
        defaults = ShardDatasetConfig()
        return {name: getattr(self.config, name) for name in sorted(LOADER_FIELDS)
                if getattr(self.config, name) != getattr(defaults, name)}

    def __repr__(self) -> str:
        if isinstance(self.source, dict):
            where = "{" + ", ".join(f"{name!r}: {_shown(s)!r}" for name, s in self.source.items()) + "}"
            return f"ShardDataset({where}, {len(self)} samples, {self.config})"
        where = _shown(self.source)
        return f"ShardDataset({where!r}, {len(self)} samples, {self.config})"


def _shown(source: str | Path) -> str:
    """A source as messages show it (a URL without credentials)."""
    return redact(source) if isinstance(source, str) and is_remote(source) else str(source)
