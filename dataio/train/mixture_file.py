"""A mixture file (``dataio train --mixture FILE``): JSON, or YAML when PyYAML is installed.

::

    {"sources": {"web": "tokens/web", "code": "tokens/code", "books": "s3://corpus/books"},
     "schedule": [{"at": "90%", "weights": {"web": 0.5, "code": 0.3, "books": 0.2}},
                  {"at": "100%", "weights": {"web": 0.2, "code": 0.3, "books": 0.5}}],
     "epoch_until": "all"}

``weights`` (one blend for the run) or ``schedule`` (breakpoints: ``at`` a
fraction of training, ``"90%"`` or ``0.9``, or a step, an integer); optional
``interpolation`` (``linear``, the default, or ``constant``), ``epoch_length``
and ``epoch_until``. A relative source folder is relative to the file's own
folder, so a file travels with its data; each local one must exist.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dataio.formats.remote.storage import is_remote
from dataio.train.mixture_schedule import RunSchedule

KEYS = ("sources", "weights", "schedule", "interpolation", "epoch_length", "epoch_until")


def read_mixture_file(path: Path) -> dict[str, Any]:
    """``TrainConfig`` fields (``train``, ``weights`` and the epoch rule) from ``path``; ValueError naming the file
    and the key that is wrong."""
    data = _load(path)
    try:
        return _fields(data, path.parent)
    except ValueError as e:
        raise ValueError(f"mixture file {path}: {e}") from None


def _load(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"mixture file {path} cannot be read: {getattr(e, 'strerror', None) or e}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml  # lazy: PyYAML is optional, needed only for YAML mixture files
        except ImportError:
            raise ValueError(f"mixture file {path} is YAML, which needs PyYAML (pip install pyyaml); or write it "
                             "as JSON") from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ValueError(f"mixture file {path} is not valid YAML: {' '.join(str(e).split())}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"mixture file {path} is not valid JSON: line {e.lineno} column {e.colno}: {e.msg}") from None


def _fields(data: Any, folder: Path) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ValueError(f"it must hold an object with keys {', '.join(KEYS)}, got {type(data).__name__}")
    unknown = [str(k) for k in data if k not in KEYS]
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(map(repr, unknown))} (known: {', '.join(KEYS)})")
    sources = data.get("sources")
    if not isinstance(sources, dict) or not sources:
        raise ValueError("sources must be an object {name: folder or URL}, with at least one source")
    train: dict[str, str | Path] = {}
    for name, where in sources.items():
        if not isinstance(where, str) or not where:
            raise ValueError(f"sources.{name} must be a folder or URL, got {where!r}")
        if is_remote(where):
            train[str(name)] = where
            continue
        local = folder / Path(where).expanduser()
        if not local.exists():
            raise ValueError(f"sources.{name}: {local} does not exist")
        train[str(name)] = local
    if ("weights" in data) == ("schedule" in data):
        raise ValueError("give one of weights (one blend {name: weight}) and schedule (a list of breakpoints "
                         "{\"at\": \"90%\" or a step, \"weights\": {name: weight}})")
    interpolation = data.get("interpolation", "linear")
    if "weights" in data:
        if not isinstance(data["weights"], dict):
            raise ValueError(f"weights must be an object {{name: weight}}, got {data['weights']!r:.80}")
        blend: Any = data["weights"]
    else:
        blend = _breakpoints(data["schedule"])
    fields: dict[str, Any] = {"train": train,
                              "weights": RunSchedule.of(blend, tuple(train), interpolation=interpolation)}
    if data.get("epoch_length") is not None:
        if isinstance(data["epoch_length"], bool) or not isinstance(data["epoch_length"], int):
            raise ValueError(f"epoch_length must be an integer, got {data['epoch_length']!r}")
        fields["epoch_length"] = data["epoch_length"]
    if data.get("epoch_until") is not None:
        if not isinstance(data["epoch_until"], str):
            raise ValueError(f"epoch_until must be a source name or 'all', got {data['epoch_until']!r}")
        fields["epoch_until"] = data["epoch_until"]
    return fields


def _breakpoints(schedule: Any) -> list[tuple[Any, dict]]:
    if not isinstance(schedule, list) or not schedule:
        raise ValueError("schedule must be a list of breakpoints {\"at\": ..., \"weights\": {name: weight}}")
    points = []
    for i, point in enumerate(schedule):
        if not isinstance(point, dict) or set(point) != {"at", "weights"} or not isinstance(point["weights"], dict):
            raise ValueError(f"schedule[{i}] must be {{\"at\": \"90%\" or a step, \"weights\": {{name: weight}}}}, "
                             f"got {point!r:.80}")
        points.append((point["at"], point["weights"]))
    return points
