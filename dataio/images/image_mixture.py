"""A mixture of image sources as one data set: their tables end to end, one class map, and the blend's epochs.

``ImageLoader({"imagenet": path, "extra": url}, weights={...})`` opens each
source (``image_source``) and builds this once. The sources' sample tables are
laid end to end (sample ``offsets[s] + i`` is source ``s``'s sample ``i``;
shard numbers likewise), labels already in the combined class space
(``class_map``), so the loader's per-batch path is the single source's: it
indexes one table and reads through one files object (``MixedShardFiles``).
All the mixture adds is the epoch's order, ``MixturePlan.order``: an int64
array per epoch (a blend at ~0.06 us a position in C, and one permutation per
source pass), computed once per epoch and sliced per batch like the single
source's.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from dataio.formats.dataset.manifest import Manifest, ShardEntry
from dataio.formats.kinds import KINDS
from dataio.formats.dataset.sample_table import SCHEMA, SampleTable
from dataio.formats.fallback_log import warn_once
from dataio.formats.remote.storage import redact
from dataio.images.class_map import ClassMap
from dataio.images.config import ImageLoaderConfig
from dataio.images.image_source import ImageSource
from dataio.images.mixed_shard_files import MixedShardFiles
from dataio.mixtures.mixture_plan import MixturePlan
from dataio.mixtures.mixture_options import check_names, epoch_rule


class ImageMixture:
    """The sources (``{name: ImageSource}``, in the schedule's order) blended by ``config.weights``."""

    def __init__(self, sources: dict[str, ImageSource], config: ImageLoaderConfig) -> None:
        self.names = tuple(sources)
        self.sources = sources
        schedule = config.weights
        check_names(schedule, self.names)
        for name, source in sources.items():
            if len(source.table) == 0:
                raise ValueError(f"source {name!r} ({source.folder}) holds no samples")
        kinds: dict[str, list[str]] = {}  # the declared kind: its sources
        for name, s in sources.items():
            kinds.setdefault(s.manifest.declared_kind(), []).append(name)
        # one kind, or images alone of several (a labelled and an unlabelled set, DINOv2's curated and raw: a source
        # without labels gives -1); pairs beside classes would be 'labels without class names', which pairs have not
        if len(kinds) > 1 and not all(KINDS[kind].plain for kind in kinds):
            held = " and ".join(f"{names}{' hold' if i == 0 else ''} {KINDS[kind].what}"
                                for i, (kind, names) in enumerate(kinds.items()))
            raise ValueError(f"sources {held}: a mixture's sources must all be one kind (or images alone)")
        self.labelled = [name for name, s in sources.items() if s.table.label is not None]
        # the class names of every source that has them: labelled images, and boxes (whose labels are in their rows)
        named = [name for name, s in sources.items() if name in self.labelled or s.manifest.classes]
        self.class_map = ClassMap.of({name: sources[name].manifest.classes for name in named})
        sizes = [len(s.table) for s in sources.values()]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.table = self._table()
        self.files = MixedShardFiles([s.files for s in sources.values()],
                                     [_shard_name(s, entry.file) for s in sources.values() for entry in s.manifest.shards])
        self.faults = {int(base) + row: reason for base, s in zip(self.offsets, sources.values(), strict=True)
                       for row, reason in s.faults.items()}
        self.manifest = Manifest(
            kind="images", num_samples=sum(sizes), classes=self.class_map.classes,
            shards=tuple(ShardEntry(file=name, num_samples=e.num_samples, bytes=e.bytes, sha256=e.sha256)
                         for name, e in zip(self.files.names, (e for s in sources.values() for e in s.manifest.shards),
                                            strict=True)),
            options={"mixture": {name: s.manifest.fingerprint() for name, s in sources.items()}},
            sample_kind=sources[(self.labelled or self.names)[0]].manifest.declared_kind())
        rule = epoch_rule(config.epoch_length, config.epoch_until, sum(sizes))
        self.plan = MixturePlan({name: s.table.order_shards for name, s in sources.items()}, schedule, seed=config.seed,
                                rule=rule, shuffle=config.shuffles, window=config.shuffle_window)
        self.fingerprint = self._fingerprint(config)

    def _table(self) -> SampleTable:
        """The sources' tables end to end: shard numbers offset, labels in the combined class space."""
        tables = [s.table for s in self.sources.values()]
        shard_base = np.cumsum([0] + [len(s.manifest.shards) for s in self.sources.values()])[:-1]
        checksums = None
        if all(t.checksum is not None for t in tables):
            checksums = np.concatenate([t.checksum for t in tables])
        elif any(t.checksum is not None for t in tables):
            older = [name for name, t in zip(self.names, tables, strict=True) if t.checksum is None]
            warn_once("mixture-checksums", f"mixture: per-sample checksums are not checked, as the sample tables of "
                                           f"{older} predate them (format 1.1); convert those sources again")
        return SampleTable(
            shard=np.concatenate([t.shard.astype(np.int32) + base for t, base in zip(tables, shard_base, strict=True)]),
            offset=np.concatenate([t.offset for t in tables]),
            size=np.concatenate([t.size for t in tables]),
            label=(None if not self.labelled else  # no source with labels (pairs, boxes, views): none; else -1 there
                   np.concatenate([self.class_map.labels(name, t.label) if t.label is not None
                                   else np.full(len(t), -1, np.int32)
                                   for name, t in zip(self.names, tables, strict=True)])),
            width=np.concatenate([t.width for t in tables]),
            height=np.concatenate([t.height for t in tables]),
            table=pa.concat_tables([t.table.select(SCHEMA.names) for t in tables]),
            checksum=checksums)

    def _fingerprint(self, config: ImageLoaderConfig) -> str:
        """Of the sources (their manifests' fingerprints), the class map and the blend: a state saved on another
        mixture (other sources, names, classes, weights or epoch rule) is refused."""
        schedule = config.weights
        blend = {"sources": [s.manifest.fingerprint() for s in self.sources.values()], "names": list(self.names),
                 "classes": list(self.class_map.classes),
                 "class_map": {k: list(v) for k, v in (self.class_map.per_source or {}).items()},
                 "points": [[position, list(weights)] for position, weights in schedule.points],
                 "interpolation": schedule.interpolation, "rule": [config.epoch_length, config.epoch_until]}
        return "mix-" + hashlib.sha256(json.dumps(blend, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def describe(self) -> str:
        """The sources as messages name them: ``name (folder or redacted URL), ...``."""
        return "mixture of " + ", ".join(f"{name} ({redact(str(s.folder))})" for name, s in self.sources.items())

    def epoch_size(self, epoch: int) -> int:
        """Samples in ``epoch`` (the rule's; the epochs before it are blended once to find where it starts)."""
        span = self.plan.span(epoch)
        return span.stop - span.start

    def source_of(self, samples: np.ndarray) -> np.ndarray:
        """The source index of each (combined) sample id."""
        return np.searchsorted(self.offsets, samples, side="right") - 1

    def close(self) -> None:
        self.files.close()


def _shard_name(source: ImageSource, file: str) -> str:
    """A shard's full name: its path in a local folder, or the redacted URL a remote source gives it."""
    if source.location.remote:
        return source.location.display(file)
    return str(Path(source.folder) / file)
