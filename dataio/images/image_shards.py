"""An opened image data set, read a sample at a time: one shard folder (or URL), or a mixture's end to end.

``ImageShards.open`` opens a source (``image_source``) or each source of a
mixture (``image_mixture``, one combined table and class map) and names a bad
one at once. ``read`` returns a sample's encoded bytes checked against the
sample table's checksum; ``fetch`` reads a batch's remote ranges in one go.
Both the loader's batches (``image_batches``) and ``ShardDataset`` read
through it: neither calls into the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from dataio.formats.dataset.manifest import Manifest
from dataio.formats.dataset.sample_table import SampleTable, sample_checksum
from dataio.formats.errors import SampleError
from dataio.formats.remote.storage import Location
from dataio.images.config import ImageLoaderConfig
from dataio.images.image_mixture import ImageMixture
from dataio.images.image_source import ImageSource, open_image_source
from dataio.images.mixed_shard_files import MixedShardFiles
from dataio.images.shard_files import ShardFiles
from dataio.mixtures.mixture_options import mixture_sources, source_storage_options
from dataio.remote.remote_shard_files import RemoteShardFiles

Fetched = bytes | OSError | None


class ImageShards:
    """Manifest, sample table, shard files and faulty rows of one source or a mixture's sources."""

    def __init__(self, *, manifest: Manifest, table: SampleTable,
                 files: ShardFiles | RemoteShardFiles | MixedShardFiles,
                 faults: dict[int, str], folder: Path | str, location: Location | None, mixture: ImageMixture | None,
                 verify_samples: bool) -> None:
        self.manifest, self.table, self.files, self.faults = manifest, table, files, faults
        self.folder, self.location, self.mixture = folder, location, mixture
        self.checksums = table.checksum if verify_samples else None
        self.closed = False

    @classmethod
    def open(cls, source: str | Path | Mapping[str, str | Path], config: ImageLoaderConfig) -> "ImageShards":
        """``source``, a folder or URL, or a mixture's ``{name: folder or URL}`` (with ``config.weights``)."""
        sources = mixture_sources(source, config.weights)
        if sources is None:
            one = open_image_source(source, config, config.storage_options)
            return cls(manifest=one.manifest, table=one.table, files=one.files, faults=one.faults, folder=one.folder,
                       location=one.location, mixture=None, verify_samples=config.verify_samples)
        mixture = _open_mixture(sources, config)
        return cls(manifest=mixture.manifest, table=mixture.table, files=mixture.files, faults=mixture.faults,
                   folder=mixture.describe(), location=None, mixture=mixture, verify_samples=config.verify_samples)

    def __len__(self) -> int:
        return len(self.table)

    def fingerprint(self) -> str:
        """Which data set a loader state belongs to (a mixture's: its sources, class map and blend)."""
        return self.mixture.fingerprint if self.mixture is not None else self.manifest.fingerprint()

    def fetch(self, keys: np.ndarray) -> list[Fetched]:
        """The remote bytes of ``keys`` in one batched read (None for rows the table faults name); cached
        bytes that fail their checksum are read again from the source."""
        wanted = [i for i, sample in enumerate(keys.tolist()) if sample not in self.faults]
        requests = [(int(self.table.shard[keys[i]]), int(self.table.offset[keys[i]]), int(self.table.size[keys[i]]))
                    for i in wanted]
        checksums = None if self.checksums is None else [int(self.checksums[keys[i]]) for i in wanted]
        out: list[Fetched] = [None] * len(keys)
        for i, data in zip(wanted, self.files.read_many(requests, checksums), strict=True):
            out[i] = data
        return out

    def read(self, sample: int, fetched: Fetched = None) -> bytes:
        """The encoded image of ``sample`` from its shard (or as ``fetched`` ahead), checked against the
        table's checksum.

        Raises ValueError or OSError (data errors, so the error policy applies)
        for a row that disagrees with the manifest, bytes that are not those
        packed, or a remote read that failed after its retries.
        """
        fault = self.faults.get(sample)
        if fault is not None:
            raise ValueError(f"sample table: {fault}")
        if fetched is None and self.files.remote:
            fetched = self.fetch(np.array([sample]))[0]
        if isinstance(fetched, OSError):
            raise fetched
        data = fetched if fetched is not None else self.files.read(int(self.table.shard[sample]),
                                                                    int(self.table.offset[sample]),
                                                                    int(self.table.size[sample]))
        if self.checksums is not None and sample_checksum(data) != int(self.checksums[sample]):
            raise ValueError("checksum mismatch: the image bytes are not those packed (damaged shard)")
        return data

    def sample_error(self, sample: int, reason: str) -> SampleError:
        """A data error naming ``sample`` by shard and key."""
        shard = int(self.table.shard[sample])
        where = self.files.names[shard] if 0 <= shard < len(self.files.names) else self.manifest.sample_table
        return SampleError(where, self.table.key(sample), reason)

    def where(self, sample: int) -> str:
        """``sample`` as messages name it: its key and shard."""
        return f"sample {self.table.key(sample)!r} in shard {self.files.names[int(self.table.shard[sample])]}"

    def source_of(self) -> str | Path | dict[str, str | Path]:
        """What was opened: a folder or URL, or a mixture's ``{name: folder or URL}``."""
        if self.mixture is not None:
            return {name: one.location.url if one.location.remote else one.location.root
                    for name, one in self.mixture.sources.items()}
        assert self.location is not None  # one source
        return self.location.url if self.location.remote else self.location.root

    def close(self) -> None:
        self.closed = True
        self.files.close()


def _open_mixture(sources: dict[str, str | Path], config: ImageLoaderConfig) -> ImageMixture:
    """Each source opened, then laid end to end; the files of those opened are closed if one fails."""
    opened: dict[str, ImageSource] = {}
    try:
        for name, where in sources.items():
            options = source_storage_options(config.storage_options, sources, name)
            opened[name] = open_image_source(where, config, options)
        return ImageMixture(opened, config)
    except BaseException:
        for one in opened.values():
            one.files.close()
        raise
