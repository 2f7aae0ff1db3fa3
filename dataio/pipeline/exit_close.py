"""Close the loaders' passes still suspended when the interpreter exits, while modules are intact.

A pass broken out of and kept (``it = iter(loader); next(it)`` in a
script's globals) used to be finalized during module teardown, when its
``finally`` blocks found module globals already cleared: ``Exception ignored
in: <generator object ThreadedBatches.__iter__> ... TypeError`` on stderr at
exit. Each pass is registered here (weakly: a pass dropped earlier is closed
as usual) and closed by an ``atexit`` hook, which runs after the decode
threads have been joined and before the modules are torn down.

The same hook gives a gloo process group's worker threads a moment to let go
of their last finished all-reduce. Since torch 2.13 each collective launched
in a backward pass keeps the backward's ``contextvars`` context (a Python
object) in its captured thread-local state; the gloo thread drops that
collective a moment after the trainer has woken, and if the interpreter is
already finalizing then, the drop takes the GIL and the rank aborts with
``terminate called without an active exception`` (2 runs in 40 of a
two-rank CPU DDP script whose last step returns straight to exit, none with
the pause; a loader that is slow to shut down hid it).
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
import weakref
from collections.abc import Generator
from typing import TypeVar

G = TypeVar("G", bound=Generator)

_live: weakref.WeakSet = weakref.WeakSet()
_lock = threading.Lock()
_registered = False
_gloo_seen = False  # a pass began while a gloo process group was initialised
GLOO_GRACE_S = 0.2  # the pause at exit after such a pass: GIL released, once per process


def close_at_exit(generator: G) -> G:
    """``generator``, closed at interpreter exit if it is still alive and suspended then."""
    global _registered, _gloo_seen
    if _gloo_group_initialised():  # only ever set: a thread that saw no group cannot clear another's True
        _gloo_seen = True
    with _lock:
        if not _registered:
            atexit.register(_close_live)
            _registered = True
        _live.add(generator)
    return generator


def _gloo_group_initialised() -> bool:
    """Whether the default group runs gloo for some device: its backend *config* is read, since
    ``init_process_group()`` without a backend is named 'undefined' and ``'cpu:gloo,cuda:nccl'`` names both."""
    dist = sys.modules.get("torch.distributed")  # never imported here: a script without it has no group
    try:
        return bool(dist and dist.is_available() and dist.is_initialized() and "gloo" in dist.get_backend_config())
    except (RuntimeError, ValueError, AttributeError):  # a group torn down by another thread; a partial import
        return False


def _close_live() -> None:
    with _lock:
        live = list(_live)
    for generator in live:
        try:
            generator.close()
        except ValueError:  # "generator already executing": a daemon thread of the script is inside it
            pass
    if _gloo_seen or _gloo_group_initialised():  # or a group started after the last pass began, still up
        try:
            time.sleep(GLOO_GRACE_S)
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C (or a SIGINT handler's sys.exit) while the script is
            pass  # already ending: end without a traceback; an atexit hook cannot change the exit code anyway
