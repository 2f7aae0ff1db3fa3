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

The file is input like any other: it is read up to ``MAX_FILE_BYTES`` (so
``--mixture /dev/zero`` is refused, not read on), YAML aliases may stand for at
most ``MAX_VALUES`` values (``bounded_yaml``: the "billion laughs" is refused
before anything walks it), nesting too deep for the parser is one line, and
every message shows a value with ``shown`` (a short ``repr`` in bounded time).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dataio.formats.bounded_read import read_at_most
from dataio.formats.file_gate import FileRefused
from dataio.formats.remote.storage import is_remote
from dataio.formats.shown import shown
from dataio.mixtures.mixture_plan import MAX_EPOCH
from dataio.train.bounded_yaml import YamlTooLarge, load_bounded_yaml
from dataio.train.mixture_schedule import RunSchedule

KEYS = ("sources", "weights", "schedule", "interpolation", "epoch_length", "epoch_until")
MAX_FILE_BYTES = 1 << 20  # a mixture file is a few hundred bytes; this holds thousands of breakpoints
# Values a YAML file may stand for, each alias counted as often as it is used: more than a file of
# MAX_FILE_BYTES holds without aliases (at least two bytes a value), far fewer than a billion laughs.
MAX_VALUES = 1_000_000


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
        text = read_at_most(path, MAX_FILE_BYTES).decode("utf-8")
    except FileRefused as e:  # too large, or not a regular file (a FIFO would block here for ever)
        raise ValueError(f"mixture file {path}: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"mixture file {path} cannot be read: {getattr(e, 'strerror', None) or e}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml  # lazy: PyYAML is optional, needed only for YAML mixture files
        except ImportError:
            raise ValueError(f"mixture file {path} is YAML, which needs PyYAML (pip install pyyaml); or write it "
                             "as JSON") from None
        try:
            return load_bounded_yaml(text, MAX_VALUES)
        except yaml.YAMLError as e:
            raise ValueError(f"mixture file {path} is not valid YAML: {' '.join(str(e).split())}") from None
        except YamlTooLarge as e:
            raise ValueError(f"mixture file {path} is refused: {e}") from None
        except RecursionError:
            raise ValueError(f"mixture file {path} nests too deeply to read") from None
        except ValueError as e:  # an integer past Python's 4,300 digits
            raise ValueError(f"mixture file {path} is not valid YAML: {e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"mixture file {path} is not valid JSON: line {e.lineno} column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise ValueError(f"mixture file {path} nests too deeply to read") from None
    except ValueError as e:  # an integer past Python's 4,300 digits
        raise ValueError(f"mixture file {path} is not valid JSON: {e}") from None


def _fields(data: Any, folder: Path) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ValueError(f"it must hold an object with keys {', '.join(KEYS)}, got {type(data).__name__}")
    unknown = [k for k in data if k not in KEYS]
    if unknown:
        more = f" and {len(unknown) - 5:,} more" if len(unknown) > 5 else ""
        raise ValueError(f"unknown key(s) {', '.join(shown(str(k)) for k in unknown[:5])}{more} "
                         f"(known: {', '.join(KEYS)})")
    sources = data.get("sources")
    if not isinstance(sources, dict) or not sources:
        raise ValueError("sources must be an object {name: folder or URL}, with at least one source")
    train: dict[str, str | Path] = {}
    for name, where in sources.items():
        if not isinstance(where, str) or not where:
            raise ValueError(f"sources.{str(name):.80} must be a folder or URL, got {shown(where)}")
        if is_remote(where):
            train[str(name)] = where
            continue
        local = folder / Path(where).expanduser()
        if not local.exists():
            raise ValueError(f"sources.{str(name):.80}: {local} does not exist")
        train[str(name)] = local
    if ("weights" in data) == ("schedule" in data):
        raise ValueError("give one of weights (one blend {name: weight}) and schedule (a list of breakpoints "
                         "{\"at\": \"90%\" or a step, \"weights\": {name: weight}})")
    interpolation = data.get("interpolation", "linear")
    if "weights" in data:
        if not isinstance(data["weights"], dict):
            raise ValueError(f"weights must be an object {{name: weight}}, got {shown(data['weights'])}")
        blend: Any = data["weights"]
    else:
        blend = _breakpoints(data["schedule"])
    fields: dict[str, Any] = {"train": train,
                              "weights": RunSchedule.of(blend, tuple(train), interpolation=interpolation)}
    if data.get("epoch_length") is not None:
        length = data["epoch_length"]
        if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= MAX_EPOCH:
            raise ValueError(f"epoch_length must be an integer, >= 1 and at most {MAX_EPOCH:,}, got "
                             f"{shown(length)}")
        fields["epoch_length"] = length
    if data.get("epoch_until") is not None:
        if not isinstance(data["epoch_until"], str):
            raise ValueError(f"epoch_until must be a source name or 'all', got {shown(data['epoch_until'])}")
        fields["epoch_until"] = data["epoch_until"]
    return fields


def _breakpoints(schedule: Any) -> list[tuple[Any, dict]]:
    if not isinstance(schedule, list) or not schedule:
        raise ValueError("schedule must be a list of breakpoints {\"at\": ..., \"weights\": {name: weight}}")
    points = []
    for i, point in enumerate(schedule):
        if not isinstance(point, dict) or set(point) != {"at", "weights"} or not isinstance(point["weights"], dict):
            raise ValueError(f"schedule[{i}] must be {{\"at\": \"90%\" or a step, \"weights\": {{name: weight}}}}, "
                             f"got {shown(point)}")
        points.append((point["at"], point["weights"]))
    return points
