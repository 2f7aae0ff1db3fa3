"""``dataio.TokenDataset``: a token shard folder as a map-style ``torch.utils.data.Dataset``.

The text counterpart of ``ShardDataset``, for scripts that build a sampler
from a data set (``DistributedSampler(train_dataset)``) or batch with a
collate of their own: ``len`` and ``dataset[i]``, row ``i``'s token ids as a
1-D int64 tensor (``vocab_size`` is the tokenizer's; ids past it are a ``SampleError``
naming shard and row, or follow ``on_error``: ``dataio.loader.map_style_errors``).
The memory-mapped shards are opened in each process that reads a row; the
pickled data set holds the folder and options only. A URL's shards are copied
into a local folder once, when the data set is built (``cache_dir``, or a
temporary folder kept while the data set lives), as ``TextLoader`` does.
``dataio.DataLoader(TokenDataset(...), sampler=...)`` runs ``TextLoader`` over it.
"""

from __future__ import annotations

import dataclasses
import operator
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dataio.formats.errors import ConfigError, SampleError, ShardError
from dataio.formats.remote.storage import redact
from dataio.pipeline.error_policy import ErrorPolicy, ErrorStats
from dataio.loader.dataloader_args import given_options, keyword_checked
from dataio.loader.map_style_errors import read_or_stand_in
from dataio.remote.remote_options import DEFAULT_CACHE_LIMIT, check_remote_options, held_options, retry_policy
from dataio.remote.local_copy import local_token_folder
from dataio.text.token_shards import TokenShards

_open_lock = threading.Lock()


def _new_lock_in_child() -> None:
    """A forked child gets a fresh lock: one held by another thread at the fork would never be released."""
    global _open_lock
    _open_lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_child)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TokenDatasetConfig:
    """Options of ``TokenDataset``; they mean what ``TextLoaderConfig``'s of the same names do."""

    on_error: ErrorPolicy = ErrorPolicy.RAISE  # skip/warn: a stand-in row (dataio.loader.map_style_errors)
    max_errors: int | None = None
    verify_checksums: bool = False  # each shard's sha256, once, when the data set is built
    storage_options: Mapping[str, Any] | None = None  # as the loader's: per URL prefix, never printed
    cache_dir: str | Path | None = None
    retries: int = 4
    retry_backoff: float = 0.2

    def __post_init__(self) -> None:
        object.__setattr__(self, "on_error", ErrorPolicy(self.on_error))
        if self.max_errors is not None and self.max_errors < 0:
            raise ConfigError(f"{{0}} must be >= 0, got {self.max_errors}", "max_errors")
        check_remote_options(storage_options=self.storage_options, cache_dir=self.cache_dir,
                             cache_limit=DEFAULT_CACHE_LIMIT, retries=self.retries, retry_backoff=self.retry_backoff)
        object.__setattr__(self, "storage_options", held_options(self.storage_options))


DATASET_DEFAULTS = {f.name: f.default for f in dataclasses.fields(TokenDatasetConfig)}


class TokenDataset(torch.utils.data.Dataset):
    """``TokenDataset(folder_or_url, **options)``: ``dataset[i]`` is row ``i``'s token ids (int64, 1-D)."""

    @keyword_checked
    def __init__(self, source: str | Path, *, config: TokenDatasetConfig | None = None,
                 on_error: ErrorPolicy | str = ErrorPolicy.RAISE,
                 max_errors: int | None = None,
                 verify_checksums: bool = False,
                 storage_options: Mapping[str, Any] | None = None,
                 cache_dir: str | Path | None = None,
                 retries: int = 4,
                 retry_backoff: float = 0.2) -> None:
        """Token rows of ``source``; the keywords are :class:`TokenDatasetConfig`'s fields, ``config=`` gives them
        at once (a keyword then replaces that field)."""
        options = given_options(locals(), DATASET_DEFAULTS)
        config = dataclasses.replace(config or TokenDatasetConfig(), **options)
        self._copy_dir: tempfile.TemporaryDirectory | None = None  # a URL's copy, removed with this object
        self._setup(redact(str(source)), self._local_folder(source, config), config)
        shards = self._shards(verify_checksums=config.verify_checksums)  # a bad folder is named here
        self._num_samples, self._fingerprint = len(shards), shards.manifest.fingerprint()

    def _setup(self, source: str, folder: Path, config: TokenDatasetConfig) -> None:
        self.source, self.folder, self.config = source, Path(folder), config
        self.errors = ErrorStats(max_errors=config.max_errors)  # skip/warn: this process's bad rows
        self._opened: tuple[int, TokenShards] | None = None
        self._num_samples, self._fingerprint = 0, ""

    def _local_folder(self, source: str | Path, config: TokenDatasetConfig) -> str | Path:
        """``source`` when local; for a URL, a verified local copy of its shards (``dataio.remote.local_copy``)."""
        folder, self._copy_dir, _ = local_token_folder(
            source, storage_options=config.storage_options,
            retry=retry_policy(config.retries, config.retry_backoff), cache_dir=config.cache_dir)
        return folder

    def _shards(self, verify_checksums: bool = False) -> TokenShards:
        """This process's memory maps: opened on first use here (after a fork or an unpickling too)."""
        opened = self._opened
        if opened is not None and opened[0] == os.getpid():
            return opened[1]
        with _open_lock:
            opened = self._opened
            if opened is not None and opened[0] == os.getpid():
                return opened[1]
            shards = TokenShards(self.folder, verify_checksums)
            if self._fingerprint and shards.manifest.fingerprint() != self._fingerprint:
                raise ShardError(str(self.folder), "changed since the TokenDataset was built (its manifest differs):"
                                                   " build the data set again")
            self._opened = (os.getpid(), shards)
            return shards

    def __getstate__(self) -> dict[str, Any]:
        """The local folder and options (credentials left out: the copy is made): no memory maps."""
        return {"source": self.source, "folder": str(self.folder),
                "config": dataclasses.replace(self.config, storage_options=None),
                "num_samples": self._num_samples, "fingerprint": self._fingerprint}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._copy_dir = None  # the process that built the data set keeps (and removes) its copy
        self._setup(state["source"], state["folder"], state["config"])
        self._num_samples, self._fingerprint = state["num_samples"], state["fingerprint"]

    def __len__(self) -> int:
        return self._num_samples

    @property
    def lengths(self) -> np.ndarray:
        """Tokens in each row (int64), e.g. for a length-grouped sampler."""
        return self._shards().lengths

    @property
    def pad_id(self) -> int:
        """The tokenizer's padding id, for a collate that pads."""
        return self._shards().pad_id

    @property
    def vocab_size(self) -> int:
        """The tokenizer's vocabulary size, as the manifest records it (every id is below it; 0 if it records
        none), for the model's embedding."""
        return self._shards().vocab_size

    def __getitem__(self, index: int) -> torch.Tensor:
        """Row ``index``'s token ids (negative from the end); IndexError past the end."""
        index = operator.index(index)
        if not -len(self) <= index < len(self):
            raise IndexError(f"sample {index} is not in 0..{len(self) - 1}")
        shards = self._shards()
        tokens = read_or_stand_in(shards.checked_tokens, self._error, index % len(self), len(self),
                                  self.config.on_error, self.errors)
        return torch.from_numpy(tokens.astype(np.int64))

    def _error(self, index: int, error: BaseException) -> SampleError:
        """Row ``index`` named by shard and row, with ``error`` as the reason."""
        shards = self._shards()
        shard = shards.manifest.shards[int(shards.shard_of[index])].file
        return SampleError(shard, shards.key(index), f"{type(error).__name__}: {error}")

    # -- dataio.DataLoader(TokenDataset(...)) ---------------------------------------------
    def loader_source(self) -> Path:
        """What ``TextLoader`` reads for this data set: the local folder (a URL's copy)."""
        return self.folder

    def loader_options(self) -> dict[str, Any]:
        """This data set's options that ``TextLoader`` takes, where they differ from the defaults."""
        defaults = TokenDatasetConfig()
        return {name: getattr(self.config, name) for name in ("on_error", "max_errors")
                if getattr(self.config, name) != getattr(defaults, name)}

    def __repr__(self) -> str:
        return f"TokenDataset({self.source!r}, {len(self)} rows, {self.config})"
