"""A storage option the backend does not take: one line naming it and the backend, at open.

fsspec's filesystems take any keyword and pass them on: s3fs to
aiobotocore's session, client and ``Config``, fsspec's HTTP backend to
aiohttp's session and to every request. One that these do not take is a
``TypeError`` ("got an unexpected keyword argument 'foo'") raised from deep
inside the backend at the first request, a traceback naming neither the
option's place in ``storage_options`` nor the URL.

``connect`` builds the backend's session when the location is opened
(``set_session``, which s3fs, gcsfs and the HTTP backend define; it sends
no request), so the session's options fail there, before a conversion's
upload or a loader's first read; ``rejected_option`` turns the
``TypeError`` into a ``ConfigError`` naming the option (its path, as
``client_kwargs.foo``) and the backend. The HTTP backend's request options
fail at the first request, the manifest's read, which ``Location.read_bytes``
names the same way.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import Any

from dataio.formats.errors import ConfigError
from dataio.formats.remote.secrets import redact

_UNEXPECTED = re.compile(r"unexpected keyword argument '([^']+)'")


def connect(fs: Any, options: Mapping[str, Any], url: str) -> None:
    """Build ``fs``'s session now; an option it does not take raises ``ConfigError`` naming it."""
    set_session = getattr(fs, "set_session", None)
    if set_session is None or not inspect.iscoroutinefunction(set_session):
        return  # not an async backend: its options were taken by its constructor
    from fsspec.asyn import sync  # lazy: fsspec is only there with a remote extra

    try:
        sync(fs.loop, set_session)
    except (TypeError, AttributeError) as e:
        rejected = rejected_option(e, fs, options, url)
        if rejected is None:
            raise
        raise rejected from None
    except Exception:  # noqa: BLE001 - missing credentials, a bad region: the first read names them with the URL
        return  # the session was not kept, so that read builds it again and meets the same error


def backend_of(fs: Any) -> str:
    """``the s3 backend (s3fs.S3FileSystem)``: how messages name a filesystem."""
    protocol = fs.protocol[0] if isinstance(fs.protocol, (tuple, list)) else fs.protocol
    return f"the {protocol} backend ({type(fs).__module__.split('.')[0]}.{type(fs).__name__})"


def rejected_option(error: Exception, backend: Any, options: Mapping[str, Any], url: str) -> ConfigError | None:
    """``error`` (a ``TypeError`` or ``AttributeError`` from inside the backend) as one line naming the option it
    does not take, or the options it failed on; None when no option was given (a bug: it propagates).

    An option of the wrong type or shape (``timeout`` as text for HTTP, ``client_kwargs`` a list,
    ``config_kwargs.retries`` a string) fails deep inside aiohttp or botocore with a ``TypeError`` or an
    ``AttributeError`` that names no option: it was a traceback. Its text is shown redacted (no value).
    """
    backend = backend if isinstance(backend, str) else backend_of(backend)  # a filesystem, or its name
    found = _UNEXPECTED.search(str(error)) if isinstance(error, TypeError) else None
    if found is not None:
        path = _path_of(options, found.group(1)) or found.group(1)
        return ConfigError(f"{{0}} {path}: {backend} does not take this option, for {redact(url)}",
                           "storage_options")
    if not options:
        return None
    keys = ", ".join(sorted(_paths(options)))
    message = " ".join(str(error).split())[:200]
    return ConfigError(f"{{0}}: {backend} failed on the options given for {redact(url)} ({type(error).__name__}: "
                       f"{redact(message)}); check the type of each ({keys})", "storage_options")


def _paths(options: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The dotted paths of the options' leaves (``client_kwargs.timeout``): what a message may name."""
    paths: list[str] = []
    for key, value in options.items():
        if isinstance(value, Mapping) and value:
            paths += _paths(value, f"{prefix}{key}.")
        else:
            paths.append(prefix + key)
    return paths[:20]


def _path_of(options: Mapping[str, Any], name: str) -> str | None:
    """The dotted path of key ``name`` in ``options``, the shallowest first (``client_kwargs.foo``)."""
    level: list[tuple[str, Mapping[str, Any]]] = [("", options)]
    while level:
        deeper = []
        for prefix, mapping in level:
            for key, value in mapping.items():
                if key == name:
                    return prefix + key
                if isinstance(value, Mapping):
                    deeper.append((f"{prefix}{key}.", value))
        level = deeper
    return None
