"""The storage options of each data set of a run: the train folder (or each source of a mixture) and each
validation set.

``TrainConfig.storage_options`` gives options for every URL, per URL prefix
(``{"s3://bucket": {...}, "https://host": {...}}``), and per data set by
name: a mixture's source, a named validation set, or ``train`` and ``val``
for one folder each. A URL gets those of every URL, merged with those of the
longest prefix it lies under, then with its name's
(``StorageOptions.for_source``); a local folder gets none. An S3 training
set and an HTTP validation set thus each get their own, in one run.
"""

from __future__ import annotations

from pathlib import Path

from dataio.formats.remote.storage import is_remote
from dataio.formats.remote.storage_options import StorageOptions
from dataio.train.config import TrainConfig
from dataio.train.val_sets import val_sets

TrainOptions = StorageOptions | dict[str, StorageOptions | None] | None


def train_options(config: TrainConfig) -> TrainOptions:
    """The train loader's ``storage_options``: one folder's, or a mixture's ``{source: options}`` (each source's
    resolved here, so the loader picks them by name)."""
    if isinstance(config.train, dict):
        return {name: _options(config, folder, name) for name, folder in config.train.items()}
    return _options(config, config.train, "train")


def val_options(config: TrainConfig) -> dict[str, StorageOptions | None]:
    """Each validation set's options, by the set's name (``val`` for one folder)."""
    return {name: _options(config, folder, name) for name, folder in val_sets(config.val).items()}


def _options(config: TrainConfig, folder: str | Path, name: str) -> StorageOptions | None:
    options = config.storage_options
    if not options or not is_remote(folder):
        return None
    assert isinstance(options, StorageOptions)  # TrainConfig holds them so
    return options.for_source(str(folder), name, _names(config))


def _names(config: TrainConfig) -> tuple[str, ...]:
    """The names a key of ``storage_options`` may give: the train sources (``train`` for one folder), then the
    validation sets (``val`` for one folder)."""
    train = tuple(config.train) if isinstance(config.train, dict) else ("train",)
    return tuple(dict.fromkeys(train + tuple(val_sets(config.val))))
