"""``dataio.DataLoader(folder, ...)``: the one-line swap for ``torch.utils.data.DataLoader``.

Given a shard folder it returns the loader of the kind its manifest declares
(``dataio.formats.kinds``: ``ImageLoader`` for classification, ``PairLoader``,
``DetectionLoader``, ``ViewsLoader``, ``TextLoader`` for tokens) with
DataLoader's keywords. Given what a
script passed to DataLoader before the swap (an ImageNet-layout folder that
has not been converted, or a torchvision ``ImageFolder``), it raises a
``UsageError`` whose one line is the command that converts it, rather than
failing later on a missing manifest. A URL (``s3://``, ``gs://``, ``https://``)
works as a path does, with the loaders' ``storage_options=``.

It yields what the script's torchvision pipeline yielded: float32 images
normalised with the ImageNet mean and std (``normalize=False`` for uint8),
contiguous NCHW (``channels_last=True`` for the channels_last memory format),
with training transforms when the loader shuffles (``shuffle=True`` or a
shuffling sampler) and evaluation transforms (resize + centre crop)
otherwise, unless ``train=`` is given; the choice is logged on the
``dataio`` logger at info level.

As torch's DataLoader, it reads the whole set on every rank unless a sampler
asks for shares (a ``DistributedSampler`` passed as ``sampler=``, or the one
Lightning or Accelerate would inject: ``dataio.loader.share_request``);
``shard=True`` takes the process group's shares as dataio's own loaders do.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from dataio.formats.errors import ConfigError, UsageError
from dataio.formats.images.image_tree import IMAGE_EXTENSIONS
from dataio.formats.dataset.manifest import MANIFEST_NAME, Manifest, open_dataset
from dataio.formats.kinds import KINDS, kind_of
from dataio.formats.remote.storage import is_remote, redact
from dataio.images.kind_loader import ImageKindLoader
from dataio.images.shard_dataset import ShardDataset
from dataio.loader.dataloader_args import DATALOADER_KEYWORDS, sampler_shuffles
from dataio.remote.remote_options import DEFAULT_CACHE_LIMIT, check_remote_options, retry_policy
from dataio.mixtures.mixture_options import source_storage_options
from dataio.text.loader import TextLoader

log = logging.getLogger("dataio")
DEFAULT_RETRIES, DEFAULT_BACKOFF = 4, 0.2  # the loader configs' (ImageLoaderConfig, TextLoaderConfig)


def DataLoader(dataset: Any, batch_size: int | None = 1, shuffle: bool | None = None,  # noqa: N802 (named as
               **options: Any) -> ImageKindLoader | TextLoader | torch.utils.data.DataLoader:  # the class it replaces)
    """The loader for the shard folder (or URL) ``dataset``, with DataLoader's keywords and the loader's own options.

    A dict ``{name: folder or URL}`` with ``weights=`` is a mixture of sources of one kind (``ImageLoader``'s
    or ``TextLoader``'s ``weights``, ``epoch_length``, ``epoch_until``).

    DataLoader's defaults and positional order are kept: ``batch_size=1``,
    not shuffled unless ``shuffle=True`` or a shuffling sampler says so, text
    in fixed-size batches (``mode="fixed"``); ``DataLoader(folder, 256, True, num_workers=8)``.
    Images: float32 normalised (``normalize=False``: uint8), contiguous NCHW
    (``channels_last=True``: channels_last memory format); training
    transforms when shuffled, else evaluation ones, unless ``train=`` is given.

    A face's own keyword picks that face whatever the folder (``views=`` reads a classification folder as
    multi-crop views). A ``dataio.ShardDataset`` or ``TokenDataset`` is read as its source, with
    its options and as its items are (``DataLoader(ShardDataset(src), sampler=DistributedSampler(dataset))``);
    a ShardDataset with a transform of its own (or ``to_pil``) is read by
    ``torch.utils.data.DataLoader`` instead, with the same keywords.
    """
    read_as = None  # a kind the call asks for: a face's keyword (views=), or a data set's items
    if callable(getattr(dataset, "loader_source", None)):  # a dataio map-style data set (ShardDataset, TokenDataset)
        if getattr(dataset, "custom_transform", False):
            return _torch_dataloader(dataset, batch_size, shuffle, options)
        options = {**dataset.loader_options(), **options}
        read_as = getattr(dataset, "item_kind", lambda: None)()
        dataset = dataset.loader_source()
    read_as = next((kind.name for kind in KINDS.values() if kind.keyword and kind.keyword in options), read_as)
    sampler = options.get("sampler")
    if shuffle is not None or sampler is None:
        options["shuffle"] = bool(shuffle)
    if isinstance(dataset, Mapping):  # a mixture {name: folder or URL}, with weights= (the loaders check them)
        if not dataset:
            raise ConfigError("{0} is an empty dict of sources", "dataset")
        source: Any = {name: _shard_folder(folder) for name, folder in dataset.items()}
        manifests = {name: _manifest(folder, options, source, name) for name, folder in source.items()}
        kinds = {name: kind_of(m).name for name, m in manifests.items()}
        if len(set(kinds.values())) > 1:
            raise UsageError(f"the sources of a mixture hold one kind of shards; these differ: {kinds}")
        manifest = next(iter(manifests.values()))
    else:
        source = _shard_folder(dataset)
        manifest = _manifest(source, options)
    # torch's semantics: every rank reads the whole set unless a sampler or a framework asks for shares
    options.setdefault("shard", None)
    face = (KINDS[read_as] if read_as else kind_of(manifest)).part("face")  # else the folder's declared kind's
    face.dropin_defaults(options, where=_where(source), shuffles=bool(shuffle) or sampler_shuffles(sampler))
    loader = face(source, batch_size=batch_size, **options)
    loader._built_as = "dataio.DataLoader"  # what its one-line notes call it (else the face's own name)
    return loader


def _where(source: str | Path | dict[str, str | Path]) -> str:
    """The source as the log names it (URLs without credentials)."""
    return ", ".join(redact(str(s)) for s in source.values()) if isinstance(source, dict) else redact(str(source))


def _manifest(source: str | Path, options: dict[str, Any], sources: Mapping[str, Any] | None = None,
              name: str = "") -> Manifest:
    """The manifest of ``source`` (a URL's read with the loaders' storage and retry options; source ``name`` of
    a mixture's ``sources`` with its own, as the loaders give them)."""
    if not is_remote(source):
        return open_dataset(source)[1]
    retries = options.get("retries", DEFAULT_RETRIES)
    backoff = options.get("retry_backoff", DEFAULT_BACKOFF)
    storage_options = options.get("storage_options")
    check_remote_options(storage_options=storage_options, cache_dir=None, cache_limit=DEFAULT_CACHE_LIMIT,
                         retries=retries, retry_backoff=backoff)
    if sources is not None:
        storage_options = source_storage_options(storage_options, sources, name)
    return open_dataset(source, storage_options, retry_policy(retries, backoff))[1]


def _shard_folder(dataset: Any) -> str | Path:
    """``dataset`` as a shard folder path or URL, or a UsageError saying how to make one."""
    if is_remote(dataset):
        return dataset
    if isinstance(dataset, str) and dataset.startswith("file://"):
        dataset = dataset[len("file://"):]
    root = getattr(dataset, "root", None)
    if not isinstance(dataset, (str, os.PathLike)):
        if root is not None:  # torchvision's ImageFolder and friends
            raise UsageError(f"{type(dataset).__name__} reads JPEG files one by one: convert its folder once with "
                             f"`dataio convert images {root} OUT`, then pass OUT to dataio.DataLoader")
        raise UsageError(f"dataio.DataLoader reads shard folders (written by `dataio convert`), not a "
                         f"{type(dataset).__name__}: convert the files it reads, then pass the output folder")
    path = Path(dataset)
    if path.is_dir() and not (path / MANIFEST_NAME).is_file() and _holds_images(path):
        raise UsageError(f"{path} is an image folder that has not been converted: run "
                         f"`dataio convert images {path} OUT` once, then pass OUT to dataio.DataLoader")
    return path


def _holds_images(path: Path, depth: int = 2) -> bool:
    """Whether an image file lies within ``depth`` folder levels of ``path`` (ImageNet: class folders)."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return False
    if any(e.is_file() and e.name.lower().endswith(IMAGE_EXTENSIONS) for e in entries):
        return True
    return depth > 0 and any(_holds_images(Path(e.path), depth - 1) for e in entries[:64] if e.is_dir())


def _torch_dataloader(dataset: ShardDataset, batch_size: int | None, shuffle: bool | None,
                      options: dict[str, Any]) -> torch.utils.data.DataLoader:
    """torch's DataLoader over ``dataset``, whose transforms run per sample in its worker processes."""
    unknown = [name for name in options if name not in DATALOADER_KEYWORDS]
    if unknown:
        raise ConfigError("{0} is not a keyword of torch.utils.data.DataLoader, which reads a ShardDataset with a "
                          "transform of its own (give the option to the ShardDataset, or leave the transform out "
                          "for dataio's loader)", unknown[0])
    if not _told["torch"]:
        _told["torch"] = True
        log.info("the ShardDataset has a transform of its own: torch.utils.data.DataLoader reads it (per-sample "
                 "transforms in worker processes), not dataio's threaded loader")
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, **options)


_told = {"torch": False}  # the log line above is said once per process
