"""The mixture options both loaders take (``weights``, ``epoch_length``, ``epoch_until``), checked once here.

``TextLoaderConfig`` and ``ImageLoaderConfig`` call ``checked_weights`` in their
``__post_init__``; the loaders call ``mixture_sources`` on their ``source``
argument, ``check_names`` once the sources are open, and ``epoch_rule`` for the
``MixturePlan``. The same option then means the same, and fails with the same
message, in either loader.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dataio.formats.errors import ConfigError
from dataio.formats.remote.storage import is_remote
from dataio.formats.remote.storage_options import StorageOptions
from dataio.formats.shown import shown
from dataio.mixtures.mixture_plan import MAX_EPOCH, EpochRule
from dataio.mixtures.weight_schedule import WeightSchedule


def checked_weights(weights: Any, epoch_length: int | None, epoch_until: str | None) -> WeightSchedule | None:
    """``weights`` as a ``WeightSchedule`` (None stays None), after checking the epoch options go with it.

    ``weights``: ``{name: weight}``, ``[(position, {name: weight}), ...]`` or a ``WeightSchedule``.
    """
    schedule = weights
    if weights is not None and not isinstance(weights, WeightSchedule):
        try:
            schedule = WeightSchedule.of(weights)
        except (TypeError, AttributeError) as e:
            raise ConfigError(f"{{0}} must be {{name: weight}}, [(position, {{name: weight}}), ...] or a "
                              f"WeightSchedule, got {shown(weights)} ({e})", "weights") from None
        except ValueError as e:  # a weight or position out of range, named by WeightSchedule
            raise ConfigError(f"{{0}}: {str(e).removeprefix('points: ')}", "weights") from None
    if epoch_length is not None and epoch_until is not None:
        raise ValueError("give one of epoch_length and epoch_until")
    if (epoch_length is not None or epoch_until is not None) and schedule is None:
        raise ValueError("epoch_length and epoch_until apply to mixtures: give weights= and a dict of sources")
    if epoch_length is not None:
        try:
            EpochRule(samples=epoch_length)
        except ValueError:
            raise ConfigError(f"{{0}} must be >= 1 and at most {MAX_EPOCH:,} (an integer: an epoch is held in "
                              f"memory), got {shown(epoch_length)}", "epoch_length") from None
    return schedule


def mixture_sources(source: Any, weights: WeightSchedule | None) -> dict[str, Any] | None:
    """``{name: folder or URL}`` when ``source`` is a mixture (a dict), None for one source; refuses a dict
    without ``weights`` and ``weights`` without a dict, each in one line naming the parameter."""
    if not isinstance(source, Mapping):
        if weights is not None:
            raise ConfigError("{0} needs a mixture: pass the sources as a dict {{name: folder or URL}}", "weights")
        return None
    if weights is None:
        raise ConfigError("a dict of sources is a mixture: give {0} (e.g. {{name: share}})", "weights")
    if not source:
        raise ConfigError("{0} is an empty dict of sources", "source")
    return {str(name): value if isinstance(value, (str, Path)) else Path(value) for name, value in source.items()}


def check_names(schedule: WeightSchedule, names: tuple[str, ...]) -> None:
    """Refuse a schedule whose names are not the sources', or not in the sources' order."""
    if tuple(schedule.names) != tuple(names):
        differ = set(names) ^ set(schedule.names)
        raise ValueError(f"weights name {sorted(schedule.names)}, the sources are {sorted(names)}"
                         f"{f' (differ: {sorted(differ)})' if differ else ' (give them in the same order)'}")


def source_storage_options(storage_options: Mapping[str, Any] | None, sources: Mapping[str, Any],
                           name: str) -> StorageOptions | None:
    """The ``storage_options`` of source ``name`` of a mixture: none for a local folder; for a URL, those of every
    URL, merged with those of the longest URL prefix it lies under, then with the entry ``storage_options[name]``
    (options per source: an S3 bucket and an HTTP server need different ones; a key naming a source is never an
    option of the others), ``StorageOptions.for_source``."""
    if not storage_options or not is_remote(sources[name]):
        return None
    options = StorageOptions.of(storage_options)
    assert options is not None
    return options.for_source(str(sources[name]), name, tuple(sources))


def epoch_rule(epoch_length: int | None, epoch_until: str | None, one_pass: int) -> EpochRule:
    """The epoch of a mixture: ``epoch_until``, else ``epoch_length`` units, else ``one_pass`` units (a pass over
    every source)."""
    if epoch_until is not None:
        return EpochRule(until=epoch_until)
    return EpochRule(samples=epoch_length if epoch_length is not None else one_pass)
