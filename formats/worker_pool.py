"""An ordered map over worker processes that stops at once on Ctrl-C and never outlives its parent.

``concurrent.futures.ProcessPoolExecutor`` hangs on Ctrl-C (every worker gets
SIGINT too, and ``shutdown(wait=True)`` waits for a full queue), and its
workers live on when the parent is SIGKILLed (the OOM killer, a scheduler).
Here each worker ignores SIGINT (only the parent handles it), asks Linux to
SIGKILL it when the parent dies (``PR_SET_PDEATHSIG``, with a ``getppid``
check as the fallback for the race at start and for other systems), and
takes jobs from its own pipe; the parent keeps a bounded window of chunks in
flight, yields results in input order, and on any exit (interrupt, error,
the consumer stopping early) kills the workers without waiting for queued
work. A worker that dies raises ``WorkerDied`` in one line.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection, wait
from typing import Any, TypeVar

from dataio.formats.errors import WorkerDied

T = TypeVar("T")
R = TypeVar("R")

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_DIED = ("a {what} worker process died (killed by a signal: out of memory, or a crash in a decoder); "
         "finished shards are kept, rerun the command to resume")


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when ``parent`` dies: prctl on Linux, and exit now if it is already gone."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the getppid checks between jobs remain
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _worker(fn: Callable[[Any], Any], jobs: Connection, results: Connection, parent: int) -> None:
    """Run ``fn`` on each chunk from ``jobs`` until None; results (or the error) go back on ``results``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)
    while True:
        try:
            chunk = jobs.recv()
        except EOFError:
            return
        if chunk is None or os.getppid() != parent:
            return
        try:
            results.send((True, [fn(item) for item in chunk]))
        except Exception as e:  # the parent re-raises it; a worker must not die of a job's error
            results.send((False, e))


class _Pool:
    """Worker processes, one job pipe and one result pipe each; chunks go round-robin, so results stay in order."""

    def __init__(self, fn: Callable[[Any], Any], num_workers: int, what: str) -> None:
        context = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
        self.what = what
        self.workers, self.jobs, self.results = [], [], []
        try:
            self._start(fn, num_workers, context)
        except BaseException:  # Ctrl-C while starting: the ones already started go too
            self.kill()
            raise

    def _start(self, fn: Callable[[Any], Any], num_workers: int, context: Any) -> None:
        for _ in range(num_workers):
            job_read, job_write = context.Pipe(duplex=False)
            result_read, result_write = context.Pipe(duplex=False)
            process = context.Process(target=_worker, args=(fn, job_read, result_write, os.getpid()), daemon=True)
            process.start()
            job_read.close()
            result_write.close()
            self.workers.append(process)
            self.jobs.append(job_write)
            self.results.append(result_read)

    def send(self, worker: int, chunk: list) -> None:
        try:
            self.jobs[worker].send(chunk)
        except (BrokenPipeError, ConnectionResetError):
            raise WorkerDied(_DIED.format(what=self.what)) from None

    def receive(self, worker: int) -> list:
        """The next result of ``worker``; WorkerDied if it died instead (checked while waiting)."""
        connection, process = self.results[worker], self.workers[worker]
        while not connection.poll():
            wait([connection, process.sentinel], timeout=1.0)
            if not connection.poll() and not process.is_alive():
                raise WorkerDied(_DIED.format(what=self.what))
        try:
            ok, value = connection.recv()
        except (EOFError, OSError):
            raise WorkerDied(_DIED.format(what=self.what)) from None
        if not ok:
            raise value
        return value

    def kill(self) -> None:
        """Stop every worker now (SIGKILL: nothing they hold needs cleaning up) and reap it."""
        for process in self.workers:
            if process.is_alive():
                process.kill()
        for process in self.workers:
            process.join(timeout=5)
        for connection in self.jobs + self.results:
            connection.close()


def ordered_map(fn: Callable[[T], R], items: Iterable[T], num_workers: int, *, chunk_size: int = 8,
                window: int = 4, what: str = "convert") -> Iterator[R]:
    """``map(fn, items)`` over ``num_workers`` processes, results in input order.

    ``fn`` must be picklable by reference (a module-level function) when
    fork is unavailable; at most ``window`` chunks per worker are in flight.
    ``num_workers == 1`` runs in this process.
    """
    if num_workers <= 1:
        yield from map(fn, items)
        return
    pool = _Pool(fn, num_workers, what)
    try:
        pending: deque[int] = deque()  # the worker of each chunk in flight, in input order
        source = iter(items)
        sent = 0
        while True:
            chunk = [item for _, item in zip(range(chunk_size), source)]
            if not chunk:
                break
            pool.send(sent % num_workers, chunk)
            pending.append(sent % num_workers)
            sent += 1
            if len(pending) >= window * num_workers:
                yield from pool.receive(pending.popleft())
        while pending:
            yield from pool.receive(pending.popleft())
    finally:
        pool.kill()
