"""``--storage-option``: the command line's fsspec backend options, for every URL, a URL prefix or a data set.

- ``KEY=VALUE``: every URL of the command (as before);
- ``PREFIX:KEY=VALUE``, PREFIX a URL prefix (``s3://bucket/``, ``https://host:8443``): the URLs under it
  only, merged over the former (the longest prefix a URL lies under wins);
- ``NAME:KEY=VALUE`` (``dataio train``): the train source or validation set named NAME only (``train``,
  ``val`` for one folder each).

``a.b=v`` nests (``client_kwargs.endpoint_url=...``); a value that parses as
JSON is that value (``true``, ``3``, ``{"x": 1}``), else the text. The result
is ``storage_options`` as the library takes them
(``dataio.formats.remote.storage_options``). A malformed flag is named by
its key at most, never its value, which may be a secret.
"""

from __future__ import annotations

import json
import re

from dataio.formats.errors import UsageError

FLAG = "--storage-option"
HELP = ("an fsspec backend option, repeatable: KEY=VALUE for every URL, PREFIX:KEY=VALUE for the URLs under a URL "
        "prefix only (s3://bucket/:key=...), NAME:KEY=VALUE (train) for one train source or validation set; a.b=v "
        "nests, JSON values are parsed (default: none, the backend's own settings); AWS_* environment variables "
        "work as usual")
# A URL prefix runs to the first ':KEY=' after its '://' (a port's ':8443' is no key: keys start with a letter).
_URL_TARGET = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://.*?):([A-Za-z_][\w.-]*)=(.*)", re.DOTALL)
_NAME_TARGET = re.compile(r"([A-Za-z0-9_][\w.-]*):([A-Za-z_][\w.-]*)=(.*)", re.DOTALL)
_KEY = re.compile(r"([A-Za-z_][\w.-]*)=(.*)", re.DOTALL)


def storage_options_of(flags: list[str] | None) -> dict[str, object] | None:
    """The ``--storage-option`` flags as ``storage_options`` (None for none); ``UsageError`` naming a bad one."""
    if not flags:
        return None
    options: dict[str, object] = {}
    for text in flags:
        target, key, value = _split(text)
        where: dict[str, object] = options
        if target is not None:
            entry = options.setdefault(target, {})
            if not isinstance(entry, dict):
                raise UsageError(f"{FLAG} {target}: given as an option and as a URL prefix or name")
            where = entry
        _set(where, key, _value(value), target)
    return options


def _split(text: str) -> tuple[str | None, str, str]:
    """(URL prefix or name, or None for every URL; the key; the value's text)."""
    for pattern in (_URL_TARGET, _NAME_TARGET):
        found = pattern.fullmatch(text)
        if found:
            return found.group(1), found.group(2), found.group(3)
    found = _KEY.fullmatch(text)
    if found:
        return None, found.group(1), found.group(2)
    key = text.partition("=")[0] if "=" in text else ""
    shown = f" (key {key!r})" if key and _KEY.fullmatch(key + "=") else ""
    raise UsageError(f"{FLAG} takes KEY=VALUE, PREFIX:KEY=VALUE or NAME:KEY=VALUE{shown}")  # never the value


def _value(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _set(options: dict[str, object], key: str, value: object, target: str | None) -> None:
    """``options[a][b] = value`` for ``key`` ``a.b``."""
    *parents, leaf = key.split(".")
    where = f"{target}:" if target else ""
    for parent in parents:
        options = options.setdefault(parent, {})  # type: ignore[assignment]
        if not isinstance(options, dict):
            raise UsageError(f"{FLAG} {where}{key}: {parent} is set twice")
    if isinstance(options.get(leaf), dict):
        raise UsageError(f"{FLAG} {where}{key}: set twice")
    options[leaf] = value
