"""What no message may show: the credentials in a URL, and the storage options' values this process has seen.

``redact`` (every URL and backend error dataio shows goes through it)
removes a URL's ``user:pass@`` and signed-URL query secrets, and replaces
every storage option value remembered with ``***``: ``StorageOptions``
remembers each string value it holds. Messages dataio writes itself never
hold an option's value; this catches what a backend echoes (botocore names
a bad ``region_name`` or retry ``mode`` in its exception's text).

Only values of 8 characters or more, and not URLs, are remembered: shorter
ones ("true", "cache", a region) are common words that a message may hold
for other reasons, and no credential is that short; a URL's credentials are
removed by ``redact`` itself, and its host is what a message about a
connection must show.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any

_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")
_SECRET_QUERY = re.compile(r"(?i)([?&][^=&\s]*(?:sig|signature|token|key|secret|credential|password|auth)[^=&\s]*=)"
                           r"[^&\s#]*")
_COLLAPSED_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):/(?!/)")  # what Path leaves of "scheme://"

MIN_LENGTH = 8  # shorter values are never credentials, and are words a message may hold for other reasons
MAX_REMEMBERED = 4096  # a process rotating its session tokens forever keeps the newest this many

_lock = threading.Lock()
_values: dict[str, None] = {}  # insertion-ordered: the oldest are forgotten first past MAX_REMEMBERED
_longest_first: tuple[str, ...] = ()  # replaced whole, so scrub never sees a half-updated collection


def redact(text: str) -> str:
    """``text`` without the credentials a URL may carry and without any storage option's value remembered."""
    return scrub(redact_url(text))


def redact_url(text: str) -> str:
    """``text`` without the credentials a URL may carry (``user:pass@``, signed-URL query secrets): the same
    whatever options this process has seen (cache and staging folder names are made from it)."""
    return _SECRET_QUERY.sub(r"\1***", _USERINFO.sub("***@", text))


def redact_path(path: object) -> str:
    """``redact(str(path))`` for a ``Path`` made of a URL: ``Path("https://u:p@h/f")`` is ``https:/u:p@h/f``
    (one slash: ``redact_url`` would not see the URL), so the scheme's ``//`` is put back first."""
    return redact(_COLLAPSED_SCHEME.sub(r"\1://", str(path)))


def remember(options: Mapping[str, Any]) -> None:
    """Remember every string value in ``options`` (nested mappings and lists included)."""
    global _longest_first
    found = [value for value in _strings(options) if len(value) >= MIN_LENGTH and "://" not in value]
    if not found or all(value in _values for value in found):
        return
    with _lock:
        for value in found:
            _values.pop(value, None)
            _values[value] = None
        while len(_values) > MAX_REMEMBERED:
            del _values[next(iter(_values))]
        # longest first: a value inside a longer one must not leave the longer one's rest behind
        _longest_first = tuple(sorted(_values, key=len, reverse=True))


def scrub(text: str) -> str:
    """``text`` with every remembered value replaced by ``***``."""
    for value in _longest_first:
        if value in text:
            text = text.replace(value, "***")
    return text


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in _strings(item)]
    return []
