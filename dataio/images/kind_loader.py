"""What every image kind's loader is: a face over the loader skeleton, its parts taken from the kind's entry.

``ImageLoader`` (classification), ``PairLoader``, ``DetectionLoader`` and ``ViewsLoader`` differ in their
keywords and in what they yield; the rest is this class. It opens the shards (``ImageShards``: one source or a
mixture), takes the kind's source, finish and facts from the table (``dataio.formats.kinds``), and runs the
skeleton (``dataio.loader.source_loader``) over them: the source draws each batch's crops from a generator seeded
by (seed, epoch, rank, batch) and decode threads fill one preallocated NHWC batch; the sampling
(``image_sampling``) says which images each rank reads; the device stage (``pipeline.device_stage``) copies the
fields, runs the kind's finish and the user's ``batch_transform``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dataio.augment import SeedKey
from dataio.formats.fallback_log import info_once
from dataio.formats.kinds import KINDS, Kind, kind_of
from dataio.formats.pil_build import describe_pil
from dataio.formats.remote.storage import redact
from dataio.images.config import ImageLoaderConfig
from dataio.images.image_batches import dali_decoder
from dataio.augment.seeding import hook_seed
from dataio.images.image_sampling import ImageSampling
from dataio.images.image_shards import ImageShards
from dataio.images.turbo_decode import REGION_DECODE
from dataio.loader.batches_view import BatchesWithIds
from dataio.formats.errors import ConfigError
from dataio.images.config import one_batch_size
from dataio.loader.dataloader_args import (DATALOADER_KEYWORDS, Capabilities, check_sampler_size, constructor_defaults,
                                           dataloader_fields, did_you_mean, given_options)
from dataio.loader.rebuilt_on_unpickle import record_arguments
from dataio.loader.source_loader import SourceLoader
from dataio.pipeline.device_stage import DeviceStage
from dataio.pipeline.host_batch import HostBatch
from dataio.pipeline.loader_stats import LoaderStats, SourceCounts
from dataio.pipeline.stage_times import StageTimes
from dataio.pipeline.thread_tuner import ThreadTuner

log = logging.getLogger("dataio")


def _flat(prefix: str, value: Any) -> dict[str, Any]:
    """A kind's options as ``{"views.local_crops": 8, ...}``: JSON-safe values the same on every rank."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: v for f in dataclasses.fields(value) for k, v in _flat(f"{prefix}.{f.name}",
                                                                         getattr(value, f.name)).items()}
    if isinstance(value, (tuple, list)) and any(dataclasses.is_dataclass(item) for item in value):
        return {k: v for i, item in enumerate(value) for k, v in _flat(f"{prefix}.{i}", item).items()}
    if isinstance(value, (tuple, list)):
        return {prefix: [_plain(item) for item in value]}
    return {prefix: _plain(value)}


def _plain(value: Any) -> Any:
    """A JSON scalar as it is, a path as its string, anything else as its type's name (a tokenizer object's repr
    holds its address, another on every rank)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value) if isinstance(value, Path) else type(value).__name__
IMAGE_FIELDS = frozenset(f.name for f in dataclasses.fields(ImageLoaderConfig))
DEFAULTS = constructor_defaults(ImageLoaderConfig)
# ImageLoader's deprecated ways to read the kinds that now have faces: not the other faces' keywords
FACE_KEYWORDS = (IMAGE_FIELDS - {"captions", "targets"}) | set(DATALOADER_KEYWORDS)


class ImageKindLoader(ImageSampling, SourceLoader):
    """A loader over an image shard folder (or URL, or a mixture's ``{name: folder}``) of one kind of sample."""

    config: ImageLoaderConfig
    kind: Kind  # the kind read (``dataio.formats.kinds``)
    options: Any  # the kind's own options (``CaptionConfig``, ``DetectionConfig``, ``ViewsConfig``); None for classes
    _key_type = SeedKey  # each batch's crops, flips and device augmentation are drawn from it
    face = Capabilities(name="ImageLoader", threads=True)  # num_workers = decode threads (each face names itself)

    def _build_face(self, source: str | Path | Mapping[str, str | Path], config: ImageLoaderConfig | None, *,
                    kind: str, keyword: str, options: Any, keywords: dict[str, Any]) -> None:
        """A kind's face (``PairLoader(folder, captions=..., **keywords)``): its ``keywords`` are ``ImageLoader``'s
        (the image options and DataLoader's), checked by name; its own ``options`` (the ``keyword`` argument) by
        type. It pickles as these arguments (``rebuilt_on_unpickle``)."""
        face_kind, name = KINDS[kind], type(self).__name__
        owners = {other.keyword: other for other in KINDS.values() if other.keyword and other.keyword != keyword}
        # another face's options: in keywords, or carried by config= (ImageLoaderConfig's deprecated captions/targets)
        carried = {field: getattr(config, field) for field in owners.keys() & IMAGE_FIELDS
                   if config is not None and getattr(config, field) is not None}
        for given in [*keywords, *carried]:
            owner = owners.get(given)
            if owner is not None:
                raise ConfigError(f"{{0}} is the keyword of dataio.{owner.face.rpartition(':')[2]} ({owner.what}); "
                                  f"{name} reads {face_kind.what}", given)
        unknown = [given for given in keywords if given not in FACE_KEYWORDS]
        if unknown:
            close = did_you_mean(unknown[0], FACE_KEYWORDS | {keyword})
            raise ConfigError(f"{name} got an unknown keyword {{0}}{close}", unknown[0])
        if options is None and config is not None and keyword in IMAGE_FIELDS:
            options = getattr(config, keyword)  # a config= carrying the face's own options (PairLoader's captions)
        expected = face_kind.part("options")
        if options is not None and not isinstance(options, expected):
            raise ConfigError(f"{{0}} must be a {expected.__name__}, got {type(options).__name__}", keyword)
        self._face = (face_kind, options)
        self._build(source, one_batch_size(given_options(keywords, DEFAULTS), config), config)
        record_arguments(self, type(self).__init__, (source, config), {**keywords, keyword: options})

    def _read_as(self, shards: ImageShards, config: ImageLoaderConfig) -> tuple[Kind, Any]:
        """The kind this face reads ``shards`` as, and its options: a kind's face, its own, over the folders of the
        kinds it reads (``Kind.reads``); ``ImageLoader`` says otherwise."""
        kind, options = self._face
        held = kind_of(shards.manifest)
        if held.name not in kind.reads:
            raise ConfigError(f"{{0}} {shards.folder} holds {held.what}; {type(self).__name__} reads {kind.what} "
                              f"(read it with dataio.{held.face.rpartition(':')[2]})", "source")
        return kind, options

    def _build(self, source: str | Path | Mapping[str, str | Path], options: dict[str, Any],
               config: ImageLoaderConfig | None) -> None:
        """Open ``source`` with the face's ``options`` over ``config`` and start the skeleton."""
        base = config or ImageLoaderConfig()
        fields, self._follow = dataloader_fields(options, IMAGE_FIELDS, self.face, base)
        self.config = c = dataclasses.replace(base, **fields)
        self.shards = shards = ImageShards.open(source, c)
        try:
            self.kind, self.options = self._read_as(shards, c)
            self._start_kind(shards, c, options.get("sampler"))
        except BaseException:
            shards.close()
            raise

    def _start_kind(self, shards: ImageShards, c: ImageLoaderConfig, sampler: Any) -> None:
        self.manifest, self.table, self.files, self.folder = shards.manifest, shards.table, shards.files, shards.folder
        self.mixture, self.location = shards.mixture, shards.location  # location: one source's, None for a mixture
        check_sampler_size(sampler, len(self.table), str(self.folder))
        threads = c.threads
        dali = dali_decoder(c) if c.resolved_decoder == "dali" else None
        # auto: tuned for turbo's decode threads; DALI's own threads take the budget as it is
        tuner = ThreadTuner(threads) if c.auto_threads and threads > 1 and dali is None else None
        stats = LoaderStats(max_errors=c.max_errors, stages=StageTimes(profile=c.profile),
                            fixed_threads=None if tuner else threads, tuner=tuner,
                            sources=SourceCounts(self.mixture.names, units=("samples",)) if self.mixture else {})
        batches = self.kind.part("source")(shards, c, self.options, stats.stages, dali=dali, threads=threads)
        finish = self.kind.part("finish")(c, self.options, batches)
        self._stage = DeviceStage(c.device, stats.stages, finish, pin=c.pin_memory and torch.cuda.is_available(),
                                  batch_transform=c.batch_transform, seed_of=lambda host: hook_seed(host.key))
        self.facts = self.kind.part("facts")(shards, batches)
        # DALI: one thread, a pipeline run at a time, overlapped with the consumer
        self._start(batches, stats, fingerprint=shards.fingerprint(), threads=1 if dali else threads,
                    prefetch=c.prefetch_batches, timeout=c.timeout, num_workers=threads)
        log.info("%s(%s): %d samples (%s), %s transforms, decoder %s, %s decode threads, rank %d of %d, %s output on "
                 "%s%s", type(self).__name__, redact(str(self.folder)), len(self.table), self.kind.what,
                 "training" if c.train else "evaluation", self.decoder, "auto" if tuner else threads, self.rank,
                 self.world_size, "float32 normalised" if c.normalize else "uint8", c.device,
                 f"; {self._epoch_size(0)} samples in epoch 0, {len(self.manifest.classes)} classes combined"
                 if self.mixture else "")
        info_once("image-loader", f"{type(self).__name__} decodes with {self.decoder}; {describe_pil()}; region "
                                  f"decoder {'built' if REGION_DECODE else 'not built'}")

    @staticmethod
    def dropin_defaults(options: dict[str, Any], *, where: str, shuffles: bool) -> None:
        """What ``dataio.DataLoader`` gives an image kind's face by default, in ``options``: what the script's
        torchvision pipeline yielded (float32 normalised, contiguous NCHW), training transforms when the loader
        shuffles and evaluation ones otherwise, unless given; the choice is logged. An explicit ``config=``
        keeps its own train, normalize and layout."""
        if options.get("config") is not None:
            return
        options.setdefault("normalize", True)
        options.setdefault("channels_last", False)  # contiguous NCHW, as DataLoader stacks: x.view works
        if "train" in options:
            why = "as train= says"
        elif shuffles:
            options["train"], why = True, "as it shuffles (pass train=False for evaluation transforms)"
        else:
            options["train"], why = False, "as it does not shuffle (pass train=True for training transforms)"
        mode = ("training transforms (random-resized crop and flip)" if options["train"]
                else "evaluation transforms (resize and centre crop)")
        output = "float32 normalised" if options["normalize"] else "uint8"
        log.info("dataio.DataLoader(%s): %s %s; %s output", where, mode, why, output)

    @property
    def decoder(self) -> str:
        """The decoder in use: 'turbo' or 'dali'."""
        return "dali" if self.source.dali is not None else "turbo"

    # -- DataLoader-compatible surface -------------------------------------------------
    @property
    def batch_size(self) -> int:
        """Batch size of the current epoch (it varies with a dynamic-batch schedule)."""
        return self.config.batch_size_at(self.epoch)

    @property
    def image_size(self) -> int | tuple[int, int]:
        """Output resolution of the current epoch: a side, or (height, width) for a rectangular box loader."""
        height, width = self.config.output_shape_at(self.epoch)
        return height if height == width else (height, width)

    # -- what the samples are (the kind's facts) -----------------------------------------------
    @property
    def classes(self) -> tuple[str, ...]:
        """The class names (boxes: their categories); a mixture's combined list (``dataio.images.class_map``)."""
        return self.manifest.classes

    @property
    def class_map(self) -> dict[str, tuple[int, ...]] | None:
        """A mixture's ``{source: combined index of each of its labels}``; None for one source, or for sources
        without class names (their labels are kept)."""
        return self.mixture.class_map.per_source if self.mixture else None

    @property
    def pairs(self) -> bool:
        """Whether the samples are image-text pairs (batches are dicts: ``dataio.pairs``)."""
        return self.kind.name == "pairs"

    @property
    def vocab_size(self) -> int:
        """The vocabulary size of a pair batch's ``input_ids`` (``nn.Embedding(vocab_size, d)``); 0 without ids."""
        return self.facts.vocab_size

    @property
    def pad_id(self) -> int | None:
        """The id in ``input_ids`` past each caption's tokens (``attention_mask`` 0); None without ids."""
        return self.facts.pad_id

    @property
    def category_ids(self) -> tuple[int, ...] | None:
        """A COCO folder's category id of each label (for pycocotools' ``loadRes``); None for other folders and
        mixtures."""
        return self.facts.category_ids

    @property
    def dataset(self) -> torch.utils.data.Dataset:
        """The shards as an ``ImageFolder``-like data set (``dataio.ShardDataset``): len, classes, targets, and
        ``dataset[i]``, sample ``i`` as this loader yields it in eval mode (resized and centre-cropped to
        ``image_size``, its dtype and normalisation), so ``Subset(loader.dataset, ...)`` stacks with its batches."""
        from dataio.images.shard_dataset import ShardDataset  # lazy: torch.utils.data datasets are seldom asked for
        return ShardDataset.over_shards(self.shards, self.config, self.image_size, kind=self.kind,
                                        options=self.options)

    # -- the skeleton's hooks ----------------------------------------------------------------
    def _share_settings(self) -> dict[str, Any]:
        """What the ranks compare at their first pass: the shares' settings, the kind, and the kind's own options
        field by field (ranks whose views, captions or targets differ would train on batches of another recipe)."""
        keyword = self.kind.keyword or "options"
        return {**super()._share_settings(), "kind": self.kind.name, **_flat(keyword, self.options)}

    def _move(self, host: HostBatch) -> Any:
        return self._stage(host)

    def _counted(self, host: HostBatch) -> None:
        if self.mixture is not None:  # one bincount a batch
            self.stats.sources.add(np.bincount(self.mixture.source_of(host.samples), minlength=len(self.mixture.names)))

    def _kind(self) -> str:
        return f"{type(self).__name__}/{'train' if self.config.train else 'eval'}"

    def _sources_of(self, ids: np.ndarray) -> tuple[np.ndarray, int] | None:
        """A mixture's source of each id, for the epoch digest's per-source counts."""
        return (self.mixture.source_of(ids), len(self.mixture.names)) if self.mixture is not None else None

    def _source_names(self) -> list[str]:
        return list(self.mixture.names) if self.mixture is not None else []

    def _waiting(self) -> str:
        return self.files.waiting() if self.files.remote else ""

    # -- iteration --------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        return self._iterate(lambda moved, host: moved)

    def batches(self) -> Iterator[Any]:
        """One pass (an epoch, or its rest after a resume), each batch with its sample ids and padding flags
        (classification: ``ImageBatch``; the dict kinds carry ``sample_ids`` and ``repeated`` already).

        ``stats.stages`` records the pass's stages; ``wait`` is the consumer's
        time inside ``next()``, ``pass`` the wall time of the pass. A pass
        still suspended at interpreter exit is closed then (``pipeline.exit_close``);
        one started during another pass, or after ``close()``, is refused.
        """
        with_ids = getattr(self._stage.finish, "with_ids", None)
        return self._iterate(with_ids)

    def with_ids(self) -> BatchesWithIds:
        """This loader, iterated as ``batches()`` rather than as ``for batch in loader``: to return from a Lightning
        ``val_dataloader`` and count each sample once (``repeated`` flags the padding repeats of DDP ranks)."""
        return BatchesWithIds(self)
