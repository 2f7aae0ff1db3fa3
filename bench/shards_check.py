"""The ``--shards`` a benchmark is given, checked for its kind before anything runs or is written: a folder of another
kind (image-text pairs given to ``bench detection``) was a pyarrow ``KeyError`` traceback minutes in."""

from __future__ import annotations

from pathlib import Path

from dataio.formats.dataset.manifest import Manifest, read_manifest
from dataio.formats.errors import UsageError
from dataio.formats.kinds import KINDS, kind_of


def shards_of_kind(folder: Path, kinds: tuple[str, ...], packing: str) -> tuple[Path, Manifest]:
    """``read_manifest(folder)`` when the folder holds one of ``kinds``; else UsageError in one line naming the folder,
    what it holds and ``packing`` (how to make what the benchmark reads)."""
    found, manifest = read_manifest(folder)
    held = kind_of(manifest)
    if held.name not in kinds:
        wanted = " or ".join(KINDS[name].what for name in kinds)
        raise UsageError(f"--shards {folder} holds {held.what}, not {wanted}: give {packing}, or leave --shards out")
    return found, manifest
