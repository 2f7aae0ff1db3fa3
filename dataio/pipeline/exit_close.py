"""Close the loaders' passes still suspended when the interpreter exits, while modules are intact.

A pass broken out of and kept (``it = iter(loader); next(it)`` in a
script's globals) used to be finalized during module teardown, when its
``finally`` blocks found module globals already cleared: ``Exception ignored
in: <generator object ThreadedBatches.__iter__> ... TypeError`` on stderr at
exit. Each pass is registered here (weakly: a pass dropped earlier is closed
as usual) and closed by an ``atexit`` hook, which runs after the decode
threads have been joined and before the modules are torn down.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Generator
from typing import TypeVar

G = TypeVar("G", bound=Generator)

_live: weakref.WeakSet = weakref.WeakSet()
_lock = threading.Lock()
_registered = False


def close_at_exit(generator: G) -> G:
    """``generator``, closed at interpreter exit if it is still alive and suspended then."""
    global _registered
    with _lock:
        if not _registered:
            atexit.register(_close_live)
            _registered = True
        _live.add(generator)
    return generator


def _close_live() -> None:
    with _lock:
        live = list(_live)
    for generator in live:
        try:
            generator.close()
        except ValueError:  # "generator already executing": a daemon thread of the script is inside it
            pass
