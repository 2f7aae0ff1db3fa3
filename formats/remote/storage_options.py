"""``storage_options``: the fsspec backend options of a data set's URLs, held so that no value is ever printed.

Every config that takes ``storage_options`` (the loaders', the data sets',
the trainer's) holds a ``StorageOptions``: a read-only mapping whose
``repr`` and ``str`` show the keys and ``'***'`` for every value, so a config
printed, logged or formatted into a message shows which options were given,
never a credential. It pickles whole (a ``ShardDataset`` carries its options
into torch's worker processes); ``to_dict()`` gives the backend a plain copy.

Options per URL: a key holding ``://`` is a URL prefix, and its value the
options of the URLs under it::

    {"anon": False,                                    # every URL
     "s3://bucket": {"key": ..., "secret": ...},       # s3://bucket/... only
     "https://host/data": {"headers": {...}}}          # https://host/data/... only

A URL gets the options of every URL, with those of the longest prefix it
lies under merged over them (nested dicts merged key by key). A prefix
matches at a ``/`` boundary: ``s3://bucket`` covers ``s3://bucket/x``, not
``s3://bucket-2``; ``s3://`` covers every s3 URL. A mixture's sources (and
the trainer's validation sets) may also be named: a key that names one
holds its options, merged last (``for_source``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from dataio.formats.errors import ConfigError
from dataio.formats.remote.secrets import redact, remember

HIDDEN = "***"


def is_url_prefix(key: str) -> bool:
    """Whether an options key is a URL prefix (``s3://bucket``) rather than a backend option."""
    return "://" in key


def under(url: str, prefix: str) -> bool:
    """Whether ``url`` lies under ``prefix``, at a ``/`` boundary (``s3://`` covers every s3 URL)."""
    stem = prefix.rstrip("/")
    return url == stem or url.startswith(stem + "/")


class StorageOptions(Mapping[str, Any]):
    """A read-only mapping of backend options whose ``repr`` never shows a value (module docstring).

    Nested mappings come back as ``StorageOptions`` too, so that no part of
    it prints a value either.
    """

    __slots__ = ("_options",)

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        if options is not None and not isinstance(options, Mapping):
            raise ConfigError("{0} must be a dict of backend options, got %s" % type(options).__name__,
                              "storage_options")
        plain = _plain(options or {}, "")
        for key, value in plain.items():
            if is_url_prefix(key) and value is not None and not isinstance(value, dict):
                raise ConfigError(f"{{0}}: the options of {redact(key)} must be a dict of backend options, got "
                                  f"{type(value).__name__}", "storage_options")
        self._options: dict[str, Any] = plain
        remember(plain)

    @classmethod
    def of(cls, options: Mapping[str, Any] | None) -> "StorageOptions | None":
        """``options`` as ``StorageOptions`` (itself when it is one); None stays None."""
        if options is None or isinstance(options, StorageOptions):
            return options
        return cls(options)

    # -- the mapping ----------------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        value = self._options[key]
        return StorageOptions(value) if isinstance(value, dict) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._options)

    def __len__(self) -> int:
        return len(self._options)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StorageOptions):
            return self._options == other._options
        if isinstance(other, Mapping):
            return self._options == _plain(other, "")
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # as a dict's: the values may be dicts

    def __repr__(self) -> str:
        return f"StorageOptions({_hidden(self._options)})"

    __str__ = __repr__

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled whole: a data set's options go with it into worker processes (never into a file dataio
        writes)."""
        return StorageOptions, (self._options,)

    def to_dict(self) -> dict[str, Any]:
        """A plain deep copy, for the backend."""
        return _plain(self._options, "")

    # -- options per URL and per source ---------------------------------------------------
    def for_source(self, url: str, name: str | None = None, names: tuple[str, ...] = ()) -> "StorageOptions":
        """The options of ``url``: those of every URL, then the longest URL prefix ``url`` lies under, then (when
        ``name`` is one of ``names``, the sources' names) the entry named ``name``, each merged over the last.

        A key in ``names`` is a source's entry, never a backend option, whether or not it is ``name``.
        """
        options = {key: value for key, value in self._options.items()
                   if not is_url_prefix(key) and key not in names}
        prefixes = [key for key in self._options if is_url_prefix(key) and under(url, key)]
        if prefixes:
            options = _merged(options, self._options[max(prefixes, key=lambda k: len(k.rstrip("/")))] or {})
        for key in names:
            if key in self._options and not isinstance(self._options[key], (dict, type(None))):
                raise ConfigError(f"{{0}}: the options of source {key!r} must be a dict of backend options, got "
                                  f"{type(self._options[key]).__name__}", "storage_options")
        if name is not None and name in names and name in self._options:
            options = _merged(options, self._options[name] or {})
        return StorageOptions(options)


def _plain(options: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A deep copy of ``options`` with plain dicts for every mapping; keys must be strings."""
    plain: dict[str, Any] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise ConfigError(f"{{0}}: keys must be strings, got {type(key).__name__} in {where or 'the options'}",
                              "storage_options")
        plain[key] = _plain(value, f"{where}.{key}".lstrip(".")) if isinstance(value, Mapping) else _copy(value)
    return plain


def _copy(value: Any) -> Any:
    """Lists copied (the options are read-only); anything else is the backend's object, kept as given."""
    return [_copy(v) for v in value] if isinstance(value, list) else value


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into a copy of ``base``, nested dicts key by key."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def _hidden(options: dict[str, Any]) -> str:
    """``{'key': '***', 'client_kwargs': {'endpoint_url': '***'}}``: the keys (URL prefixes without their
    credentials), never a value."""
    parts = [f"{redact(key)!r}: {_hidden(value) if isinstance(value, dict) else repr(HIDDEN)}"
             for key, value in options.items()]
    return "{" + ", ".join(parts) + "}"
