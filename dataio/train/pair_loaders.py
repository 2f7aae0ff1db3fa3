"""The pair loaders of ``dataio train --task clip``: ``PairLoader``s over image-text pair folders, as ``ClipTask``
takes them (its ``PairLoaderFactory``, and the ``PairLoaders`` it makes).

Training reads ``config.train`` (a folder, URL or mixture) with open_clip's crops (RandomResizedCrop of
90-100% of the area, no flip: a caption may say left or right) and its normalisation (OpenAI's mean and std), the captions' ids cut at
``context_length`` tokens (the stored ids, or ``config.tokenizer`` on the decode threads); validation
reads each ``config.val`` set with centre crops, unshuffled. The text tower's vocabulary is the ids'
(the manifest's tokenizer, or the given one's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from dataio.formats.errors import ConfigError
from dataio.formats.files import sha256_file
from dataio.pairs.caption_config import CaptionConfig
from dataio.pairs.loader import PairLoader
from dataio.train.config import TrainConfig
from dataio.train.mixture_counts import ReadTally
from dataio.train.mixture_schedule import RunUnits
from dataio.train.set_options import train_options, val_options
from dataio.train.task import Tally, TrainLoader
from dataio.train.task_choice import RunData
from dataio.train.val_sets import val_sets

Batch = dict[str, torch.Tensor]

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)  # open_clip's OPENAI_DATASET_MEAN / _STD
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)
CLIP_CROP_SCALE = (0.9, 1.0)  # open_clip's RandomResizedCrop scale for training


@dataclass
class PairLoaders:
    """A run's pair loaders and what the text tower needs to know of their tokenizer."""

    train: TrainLoader
    val: Mapping[str, TrainLoader]  # {} without validation; {"val": loader} for one folder (``val_sets``)
    vocab_size: int
    context_length: int  # the longest ``input_ids`` row the loaders give
    tally: Tally | None = None  # a mixture's per-source counts (``ReadTally``); None for one source
    mixture: dict | None = None  # what a resume must find unchanged (``mixture_record``)
    tokenizer: dict | None = None  # {"file", "sha256"} of the ids' tokenizer: what a resume must find unchanged


# ClipTask's loaders: the run's config and device -> its PairLoaders (a stand-in in tests/train/pair_stand_in.py)
PairLoaderFactory = Callable[[TrainConfig, torch.device], PairLoaders]


def _mixture(config: TrainConfig, loader_samples: int) -> tuple[dict[str, Any], dict | None]:
    """ImageLoader's mixture keywords (the schedule placed in samples), and what a resume must find unchanged."""
    c = config
    if not c.mixture:
        return {}, None
    units = RunUnits(epochs=c.epochs, epoch_units=None if c.epoch_until else c.epoch_length or loader_samples,
                     per_step=c.world_size * c.batch_size, unit="samples")
    weights = c.weights.first_blend() if c.weights.constant else c.weights.resolve(units)
    schedule = c.weights.resolve(units)
    record = {"sources": list(schedule.names), "points": [[p, list(w)] for p, w in schedule.points],
              "interpolation": schedule.interpolation, "unit": "samples", "epoch_length": c.epoch_length,
              "epoch_until": c.epoch_until}
    return dict(weights=weights, epoch_length=c.epoch_length, epoch_until=c.epoch_until), record


def pair_loaders(config: TrainConfig, device: torch.device, data: RunData | None = None) -> PairLoaders:
    """The run's train and validation pair loaders (``PairLoaderFactory``); ``data``, the run's manifests, tell a
    mixture's samples (read when not given)."""
    c = config
    captions = CaptionConfig(tokenizer=c.tokenizer, max_length=c.context_length)
    common: dict[str, Any] = dict(
        num_workers=c.num_workers, cpu_budget=c.cpu_budget, profile=c.profile_steps > 0, device=str(device),
        normalize=True, mean=OPENAI_MEAN, std=OPENAI_STD, channels_last=c.channels_last,
        pin_memory=device.type == "cuda", world_size=c.world_size, rank=c.rank, seed=c.seed, captions=captions)
    options, val_options_of = train_options(c), val_options(c)
    mixture, record = _mixture(c, (data or RunData(c)).samples if c.mixture else 0)
    loaders: list[PairLoader] = []
    try:
        loaders.append(PairLoader(c.train, batch_size=c.batch_size, image_size=c.image_size, train=True,
                                  crop_scale=CLIP_CROP_SCALE, hflip=0.0, storage_options=options, **mixture, **common))
        val = {}
        for name, folder in val_sets(c.val).items():
            val[name] = PairLoader(folder, batch_size=c.batch_size, image_size=c.image_size, train=False,
                                   storage_options=val_options_of[name], **common)
            loaders.append(val[name])
        _check_ids(loaders[0], val, c.tokenizer is None)
    except BaseException:
        for loader in loaders:  # their decode threads and open shards
            loader.close()
        raise
    train = loaders[0]
    tally = ReadTally(train, c.weights.names) if c.mixture else None
    return PairLoaders(train=train, val=val, vocab_size=train.source.captions.vocab, context_length=c.context_length,
                       tally=tally, mixture=record, tokenizer=_tokenizer_record(c, train))


def _tokenizer_record(config: TrainConfig, train: PairLoader) -> dict[str, str]:
    """The tokenizer whose ids the text tower learns: the file given (its sha256), else the train set's stored
    one (the manifest's record): its file in the folder, or a client's tokenizer by its source (``file: null``,
    ``source: "open_clip:SimpleTokenizer"``: no file was stored, so the folder's path would name nothing)."""
    if config.tokenizer is not None:
        return {"file": str(config.tokenizer), "sha256": sha256_file(config.tokenizer)}
    record = train.source.captions.data.tokenizer
    if record.get("file") is None and record.get("source"):
        return {"file": str(record["source"]), "sha256": str(record["sha256"])}
    return {"file": f"{train.folder}/{record.get('file') or 'tokenizer.json'}", "sha256": str(record["sha256"])}


def _check_ids(train: PairLoader, val: dict[str, PairLoader], stored: bool) -> None:
    """Refuses sets without ids, and stored ids of another tokenizer than the train set's (the same id would
    mean another token in validation)."""
    if not train.source.captions.ids:
        raise ConfigError(f"{{0}}: {train.folder} holds captions without token ids: pack it with --tokenizer FILE "
                          "or --train-tokenizer bpe, or give --tokenizer FILE to tokenise as it is read", "tokenizer")
    if not stored:
        return
    ours = train.source.captions.data.tokenizer["sha256"]
    for name, loader in val.items():
        if not loader.source.captions.ids:
            raise ConfigError(f"{{0}}: validation set {name} ({loader.folder}) holds captions without token ids: "
                              "pack it with the train set's tokenizer (--tokenizer FILE), or give --tokenizer FILE "
                              "to tokenise both as they are read", "tokenizer")
        if loader.source.captions.data.tokenizer["sha256"] != ours:
            raise ConfigError(f"{{0}}: validation set {name} ({loader.folder}) holds ids of another tokenizer than "
                              f"{train.folder}: pack both with one, or give --tokenizer FILE to tokenise both as "
                              "they are read", "tokenizer")
