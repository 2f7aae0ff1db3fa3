"""Where a data set lives: a local folder, or any fsspec URL (``s3://``, ``gs://``, ``https://``, ...).

Remote storage goes through fsspec and its maintained backends (s3fs,
gcsfs, aiohttp), installed as extras (``pip install torch-dataio[s3]``); local
paths never touch fsspec, so the local fast path (``os.pread``, memory maps)
is unchanged. Credentials come from ``storage_options`` (per URL prefix:
``storage_options``) or the backend's usual environment variables
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...); they never appear in a
message: every URL and backend error shown goes through ``redact``
(``secrets``), and ``StorageOptions`` never prints a value.

Every request is bounded in time: ``open_location`` gives the s3 and HTTP
backends connect and read timeouts (unless ``storage_options`` set their
own) and leaves retrying to ``RetryPolicy`` alone. With the backends'
defaults (s3fs retrying each call 5 times, botocore up to 5 attempts of
15 s reads each) a range read on a stalled object store was still
blocked after 195 s with ``retries=1``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from dataio.formats.bounded_read import FileTooLarge
from dataio.formats.errors import ConfigError, UsageError
from dataio.formats.remote.backend_check import connect, rejected_option
from dataio.formats.remote.secrets import redact, redact_url
from dataio.formats.remote.storage_options import StorageOptions
from dataio.formats.file_gate import open_input, read_input

T = TypeVar("T")

# Backend packages per URL scheme, for the error that says what to install.
_EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "http": "http", "https": "http"}
# Permanent failures: retrying cannot help (missing object, refused credentials, bad request).
PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, ValueError)
DEFAULT_TIMEOUT = 20.0  # seconds a request may wait to connect, or for its next bytes, before it fails


def is_remote(source: str | Path) -> bool:
    """Whether ``source`` is a URL of a remote filesystem (``file://`` and plain paths are local)."""
    return isinstance(source, str) and "://" in source and not source.startswith("file://")


def describe(error: BaseException) -> str:
    """One redacted line for ``error``: its type and message (a botocore message may hold a URL)."""
    message = " ".join(str(error).split()) or ("timed out" if isinstance(error, TimeoutError) else "no message")
    return redact(f"{type(error).__name__}: {message}")


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` from a remote read is worth retrying (a reset, timeout, 5xx; not a 403/404)."""
    if isinstance(error, PERMANENT):
        return False
    if type(error).__name__ in ("NoCredentialsError", "PartialCredentialsError", "NoRegionError"):
        return False
    return isinstance(error, remote_errors())


def remote_errors() -> tuple[type[BaseException], ...]:
    """What a remote read raises on a failure of the storage or the network (never a bug's TypeError)."""
    errors: list[type[BaseException]] = [OSError, TimeoutError, ConnectionError]
    try:
        import botocore.exceptions  # lazy: only with the s3 extra
        errors.append(botocore.exceptions.BotoCoreError)
    except ImportError:
        pass
    try:
        import aiohttp  # lazy: only with the http (or s3) extra
        errors.append(aiohttp.ClientError)
    except ImportError:
        pass
    return tuple(errors)


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries in all, sleeping ``backoff * 2**k`` seconds (capped at ``max_backoff``) between."""

    attempts: int = 5
    backoff: float = 0.2
    max_backoff: float = 10.0

    def delay(self, attempt: int) -> float:
        return min(self.max_backoff, self.backoff * 2 ** attempt)

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()``, retried on transient errors; the last error is raised as it came."""
        for attempt in range(self.attempts):
            try:
                return fn()
            except remote_errors() as e:  # permanent ones and the last attempt propagate
                if not is_transient(e) or attempt == self.attempts - 1:
                    raise
                time.sleep(self.delay(attempt))
        raise AssertionError("unreachable")


@dataclass(frozen=True)
class Location:
    """A data set's folder: ``fs`` None for a local ``Path`` root, else an fsspec filesystem and its root."""

    root: Any  # Path (local) or str (the backend's path, without the protocol)
    fs: Any = None
    url: str = ""  # the URL as given, for messages (always shown redacted)
    options: StorageOptions | None = field(default=None, compare=False)  # this URL's, to name one the backend refuses

    @property
    def remote(self) -> bool:
        return self.fs is not None

    def path(self, name: str) -> Any:
        """The path of file ``name`` in the folder (for this location's filesystem)."""
        return self.root / name if self.fs is None else f"{self.root.rstrip('/')}/{name}"

    def display(self, name: str = "") -> str:
        """``name``'s URL (or path) with any credential removed, for messages."""
        if self.fs is None:
            return str(self.root / name if name else self.root)
        return redact(f"{self.url.rstrip('/')}/{name}" if name else self.url)

    def cache_key(self) -> str:
        """A short stable name for this location (staging and cache folders)."""
        return hashlib.sha256(redact_url(self.url or str(self.root)).encode()).hexdigest()[:16]

    def read_bytes(self, name: str, retry: RetryPolicy | None = None, limit: int | None = None) -> bytes:
        """The whole file ``name``: small files only (manifest, sample table, tokenizer); with ``limit``, one
        past it is ``FileTooLarge``, read no further than ``limit + 1`` bytes."""
        if self.fs is None:
            if limit is None:
                with open_input(self.root / name) as f:  # the gate: a regular file, no FIFO or kernel file
                    return f.read()
            return read_input(self.root / name, limit)
        bounds = {} if limit is None else {"start": 0, "end": limit + 1}
        try:
            data = (retry or RetryPolicy()).call(lambda: self.fs.cat_file(self.path(name), **bounds))
        except (TypeError, AttributeError) as e:  # the first request: an option the backend does not take
            refused = rejected_option(e, self.fs, self.options or {}, self.url)
            if refused is None:
                raise
            raise refused from None
        if limit is not None and len(data) > limit:  # permanent: outside the retries
            raise FileTooLarge(f"file too large: it reads on past {limit:,} bytes (limit {limit:,})")
        return data


def bounded_options(scheme: str, storage_options: Mapping[str, Any] | None, timeout: float) -> dict[str, Any]:
    """``storage_options`` with connect and read timeouts of ``timeout`` seconds and one attempt per call.

    s3 (s3fs over aiobotocore): botocore's ``connect_timeout``,
    ``read_timeout`` and ``retries`` in ``config_kwargs`` (s3fs's own
    retries, a class attribute, are set by ``open_location``); HTTP
    (aiohttp): a ``ClientTimeout`` in ``client_kwargs``
    (per connect and per socket read, no total: a large file may take
    long, but never stall). A value the caller gave is kept; other schemes
    are returned as given.
    """
    options = dict(storage_options or {})
    for name in ("config_kwargs", "client_kwargs"):  # merged with the timeouts below: a dict, or none
        if not isinstance(options.get(name) or {}, Mapping):
            raise ConfigError(f"{{0}} {name}: must be a dict of options, got {type(options[name]).__name__}",
                              "storage_options")
    if scheme in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("connect_timeout", timeout)
        config.setdefault("read_timeout", timeout)
        config.setdefault("retries", {"total_max_attempts": 1})
        options["config_kwargs"] = config
    elif scheme in ("http", "https"):
        try:
            import aiohttp  # lazy: only with the http extra (a missing one is reported by open_location)
        except ImportError:
            return options
        client = dict(options.get("client_kwargs") or {})
        client.setdefault("timeout", aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout))
        options["client_kwargs"] = client
    return options


def open_location(source: str | Path, storage_options: Mapping[str, Any] | None = None,
                  timeout: float = DEFAULT_TIMEOUT) -> Location:
    """The ``Location`` of ``source``: a local folder or manifest path, or an fsspec URL.

    A URL whose backend is not installed raises ``UsageError`` naming the
    extra to install; the options of ``source`` in ``storage_options``
    (``StorageOptions.for_source``: those of every URL, and of the longest
    URL prefix it lies under) go to the backend with the timeouts of
    ``bounded_options`` added, and one it does not take raises
    ``ConfigError`` naming it (``backend_check``).
    """
    options = StorageOptions.of(storage_options)
    if not is_remote(source):
        if options and options.for_source(str(source)):
            raise UsageError(f"storage_options are for remote URLs; {source} is a local path")
        text = str(source)
        return Location(Path(text[len("file://"):] if text.startswith("file://") else text))
    resolved = options.for_source(str(source)) if options else StorageOptions()
    scheme = str(source).split("://", 1)[0].lower()
    try:
        import fsspec.core  # lazy: remote storage is an optional extra
        fs, root = fsspec.core.url_to_fs(str(source), **bounded_options(scheme, resolved.to_dict(), timeout))
    except ImportError as e:
        extra = _EXTRAS.get(scheme, scheme)
        raise UsageError(f"{redact(str(source))}: reading {scheme}:// needs `pip install torch-dataio[{extra}]` "
                         f"({type(e).__name__}: {e.name or e})") from None
    except ConfigError:  # an option of the wrong shape, named (``bounded_options``)
        raise
    except ValueError as e:  # an unknown protocol
        raise UsageError(f"{redact(str(source))}: {describe(e)}") from None
    except (TypeError, AttributeError) as e:  # the backend's constructor, on an option of the wrong type
        refused = rejected_option(e, f"the {scheme} backend", resolved, str(source))
        if refused is None:
            raise
        raise refused from None
    if scheme in ("s3", "s3a") and isinstance(getattr(fs, "retries", None), int):
        fs.retries = 1  # s3fs retries each call 5 times by default; RetryPolicy is the one retrying
    connect(fs, resolved, str(source))
    url = str(source)
    if url.endswith("/manifest.json"):
        url, root = url[: -len("/manifest.json")], root[: -len("/manifest.json")]
    return Location(root.rstrip("/") if scheme not in ("http", "https") else url.rstrip("/"), fs, url.rstrip("/"),
                    resolved)
