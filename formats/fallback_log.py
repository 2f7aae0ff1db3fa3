"""Say once per process which slower path dataio takes, and why (``logging.getLogger("dataio")``).

The C extensions are optional, so a ``pip install`` without a compiler or libjpeg headers still
succeeds; the loader, the packer and RandAugment then fall back to PIL or torch ops. Each fallback is
logged as a warning the first time it is taken in a process, never per image or per batch.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger("dataio")
_said: set[str] = set()
_lock = threading.Lock()  # decode threads may reach the same fallback at once


def _first_time(key: str) -> bool:
    with _lock:
        if key in _said:
            return False
        _said.add(key)
        return True


def warn_once(key: str, message: str) -> bool:
    """Log ``message`` as a warning unless ``key`` was logged before in this process; whether it was logged."""
    if not _first_time(key):
        return False
    log.warning("dataio: %s", message)
    return True


def info_once(key: str, message: str) -> bool:
    """As ``warn_once``, at INFO level: what is in use, for whoever turns the ``dataio`` logger up."""
    if not _first_time(key):
        return False
    log.info("dataio: %s", message)
    return True
