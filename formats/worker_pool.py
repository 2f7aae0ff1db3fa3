"""An ordered map over worker processes that stops at once on Ctrl-C and never outlives its parent.

``concurrent.futures.ProcessPoolExecutor`` hangs on Ctrl-C (every worker gets
SIGINT too, and ``shutdown(wait=True)`` waits for a full queue), and its
workers live on when the parent is SIGKILLed (the OOM killer, a scheduler).
Here each worker ignores SIGINT (only the parent handles it), asks Linux to
SIGKILL it when the parent dies (``PR_SET_PDEATHSIG``, with a ``getppid``
check as the fallback for the race at start and for other systems), and
takes jobs from its own pipe; on any exit (interrupt, error, the consumer
stopping early) the parent kills the workers without waiting for queued
work. A worker that dies raises ``WorkerDied`` in one line.

Jobs may carry large payloads (image bytes of a Parquet source). A pipe holds
64 KB, so a parent that blocked writing a job while every worker blocked
writing its result would hang for ever (it did, with 2 workers and ~110 KB
images). So jobs are written by a sender thread while the calling thread
reads results in input order, and what is in flight is bounded in bytes as
well as in chunks: items are pickled one by one in the calling thread (a
pickling error is raised there), a chunk closes at ``chunk_size`` items or
``chunk_bytes``, and no more chunks are queued once ``window * chunk_bytes``
per worker are waiting for their results.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import queue
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import ForkingPickler
from typing import Any, TypeVar

from dataio.formats.errors import WorkerDied

T = TypeVar("T")
R = TypeVar("R")

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
CHUNK_BYTES = 4 << 20  # a chunk closes once its items pickle to this many bytes (one camera photo or so)
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
    """Run ``fn`` on each chunk from ``jobs`` (its item count, then each item pickled) until None; the results
    (or the error) go back on ``results``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)
    while True:
        try:
            count = jobs.recv()
            if count is None or os.getppid() != parent:
                return
            chunk = [jobs.recv_bytes() for _ in range(count)]
        except EOFError:
            return
        try:
            results.send((True, [fn(ForkingPickler.loads(item)) for item in chunk]))
        except Exception as e:  # the parent re-raises it; a worker must not die of a job's error
            results.send((False, e))


class _Pool:
    """Worker processes, one job pipe and one result pipe each; chunks go round-robin, so results stay in order.

    A sender thread writes the chunks queued by ``send`` to the job pipes, so the calling thread is never
    blocked writing while a worker is blocked writing a result it has not read yet.
    """

    def __init__(self, fn: Callable[[Any], Any], num_workers: int, what: str) -> None:
        context = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
        self.what = what
        self.workers, self.jobs, self.results = [], [], []
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.error: BaseException | None = None  # what stopped the sender, other than a dead worker
        try:
            self._start(fn, num_workers, context)
        except BaseException:  # Ctrl-C while starting: the ones already started go too
            self.kill()
            raise
        self.sender = threading.Thread(target=self._send_loop, name=f"dataio-{what}-sender", daemon=True)
        self.sender.start()  # after the forks: no child inherits a thread's half-written state

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
        """Queue ``chunk`` (pickled items) for ``worker``; returns at once."""
        self.queue.put((worker, chunk))

    def _send_loop(self) -> None:
        broken: set[int] = set()  # workers whose pipe broke: dead; ``receive`` says so when their turn comes
        try:
            while (job := self.queue.get()) is not None:
                worker, chunk = job
                if worker in broken:
                    continue
                try:
                    self.jobs[worker].send(len(chunk))
                    for item in chunk:
                        self.jobs[worker].send_bytes(item)
                except (OSError, ValueError):  # EPIPE: the worker died; ValueError/OSError: closed by kill
                    broken.add(worker)
                job = chunk = None  # not held while waiting for the next
        except BaseException as e:  # handed to the calling thread, which raises it
            self.error = e

    def receive(self, worker: int) -> list:
        """The next result of ``worker``; WorkerDied if it died instead (checked while waiting)."""
        connection, process = self.results[worker], self.workers[worker]
        while not connection.poll():
            wait([connection, process.sentinel], timeout=1.0)
            if not connection.poll() and not process.is_alive():
                raise WorkerDied(_DIED.format(what=self.what))
            if self.error is not None:
                raise self.error
        try:
            ok, value = connection.recv()
        except (EOFError, OSError):
            raise WorkerDied(_DIED.format(what=self.what)) from None
        if not ok:
            raise value
        return value

    def kill(self) -> None:
        """Stop every worker now (SIGKILL: nothing they hold needs cleaning up), the sender, and reap them."""
        for process in self.workers:
            if process.is_alive():
                process.kill()
        self.queue.put(None)  # the sender's pending write fails at once: its reader is dead
        for process in self.workers:
            process.join(timeout=5)
        sender = getattr(self, "sender", None)
        if sender is not None:
            sender.join(timeout=5)
        for connection in self.jobs + self.results:
            connection.close()


def _pickled_chunks(items: Iterable[Any], chunk_size: int, chunk_bytes: int) -> Iterator[list[memoryview]]:
    """The items pickled one by one, in chunks of ``chunk_size`` items or fewer holding ``chunk_bytes``."""
    chunk: list[memoryview] = []
    size = 0
    for item in items:
        data = ForkingPickler.dumps(item)
        chunk.append(data)
        size += len(data)
        if len(chunk) >= chunk_size or size >= chunk_bytes:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def ordered_map(fn: Callable[[T], R], items: Iterable[T], num_workers: int, *, chunk_size: int = 8,
                chunk_bytes: int = CHUNK_BYTES, window: int = 4, what: str = "convert") -> Iterator[R]:
    """``map(fn, items)`` over ``num_workers`` processes, results in input order.

    ``fn`` must be picklable by reference (a module-level function) when
    fork is unavailable. Items are taken lazily: at most ``window`` chunks per
    worker, and about ``window * chunk_bytes`` per worker of pickled items,
    wait for their results at any time. ``num_workers == 1`` runs in this process.
    """
    if num_workers <= 1:
        yield from map(fn, items)
        return
    pool = _Pool(fn, num_workers, what)
    try:
        pending: deque[tuple[int, int]] = deque()  # (worker, bytes) of each chunk in flight, in input order
        chunks = _pickled_chunks(items, chunk_size, chunk_bytes)
        in_flight, sent, more = 0, 0, True
        budget = window * num_workers * chunk_bytes
        while True:
            while more and len(pending) < window * num_workers and in_flight < budget:
                chunk = next(chunks, None)
                if chunk is None:
                    more = False
                    break
                size = sum(len(item) for item in chunk)
                pool.send(sent % num_workers, chunk)
                pending.append((sent % num_workers, size))
                in_flight += size
                sent += 1
            if not pending:
                break
            worker, size = pending.popleft()
            results = pool.receive(worker)
            in_flight -= size
            yield from results
    finally:
        pool.kill()
