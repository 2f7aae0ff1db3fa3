"""Threads for remote reads that neither ``close()`` nor the interpreter's exit ever waits for.

``ThreadPoolExecutor`` threads are not daemons and ``concurrent.futures``
joins them at exit (``threading._register_atexit``): a range read stuck on a
stalled object store held ``close()`` for minutes (still blocked after 195 s
with retries=1), and a script that had already raised its timeout could not
exit.
These threads are daemons and never joined; ``abandon()`` fails every
unfinished future at once, so whoever waits on one wakes up with the error,
and a read that returns later is dropped. At exit every live pool is
abandoned before ``concurrent.futures`` joins its workers, so decode threads
waiting on a read are let go too.
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any


class Abandoned(RuntimeError):
    """The error of a future whose pool was abandoned (loader closed, or the interpreter exiting)."""


class AbandonablePool:
    """``submit`` like an executor, on up to ``threads`` daemon threads named ``name``."""

    def __init__(self, threads: int, name: str) -> None:
        self.threads, self.name = threads, name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.RLock()  # re-entered by the done callback of a future failed under it
        self._unfinished: set[Future] = set()
        self._started = 0
        self._abandoned: Abandoned | None = None
        _LIVE.add(self)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """``fn(*args)`` on a pool thread; a future that fails with ``Abandoned`` once the pool is."""
        future: Future = Future()
        with self._lock:
            if self._abandoned is not None:
                future.set_exception(self._abandoned)
                return future
            self._unfinished.add(future)
            if self._started < self.threads:
                self._started += 1
                threading.Thread(target=self._work, name=f"{self.name}_{self._started - 1}", daemon=True).start()
        future.add_done_callback(self._finished)
        self._queue.put((future, fn, args))
        return future

    def _finished(self, future: Future) -> None:
        with self._lock:
            self._unfinished.discard(future)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args = item
            with self._lock:  # abandon() fails futures under this lock: never one between the check and the start
                if future.done() or not future.set_running_or_notify_cancel():
                    continue
            try:
                result = fn(*args)
            except BaseException as e:  # handed to the waiter, as an executor does
                _settle(future.set_exception, e)
            else:
                _settle(future.set_result, result)
            del future, fn, args, item  # a finished read's bytes are not kept alive by an idle thread

    def abandon(self, reason: str = "abandoned") -> None:
        """Fail every unfinished future with ``Abandoned(reason)`` now; running calls finish unobserved."""
        with self._lock:
            if self._abandoned is not None:
                return
            self._abandoned = Abandoned(f"{self.name}: {reason}")
            unfinished, self._unfinished = list(self._unfinished), set()
            for future in unfinished:
                _settle(future.set_exception, self._abandoned)
            threads = self._started
        for _ in range(threads):  # each idle thread ends; a busy one ends when its call returns
            self._queue.put(None)


def _settle(setter: Callable[[Any], None], value: Any) -> None:
    """Set a future's outcome unless it was abandoned (or cancelled) meanwhile."""
    try:
        setter(value)
    except InvalidStateError:
        pass


_LIVE: weakref.WeakSet[AbandonablePool] = weakref.WeakSet()


def _abandon_all() -> None:
    for pool in list(_LIVE):
        pool.abandon("the interpreter is exiting")


# Run before concurrent.futures joins its workers at exit (these hooks run last-registered first).
threading._register_atexit(_abandon_all)  # type: ignore[attr-defined]
