"""Batch buffers across a fork (a DataLoader starting its workers beside dataio's loader): the parent keeps
writing them without copy-on-write faults, a child sees the batches a user holds and zeros elsewhere."""

from __future__ import annotations

import contextlib
import faulthandler
import hashlib
import os
import resource
import signal
import sys
import tempfile
import threading
import time

import numpy as np
import pytest

from dataio import ImageLoader
from dataio.images import buffer_pool
from dataio.images.buffer_pool import BufferPool, scratch_buffer

pytestmark = pytest.mark.skipif(not buffer_pool.WIPE_ON_FORK, reason="needs Linux >= 4.14 (MADV_WIPEONFORK)")

SHAPE = (16, 256, 256, 3)  # 3 MiB: 768 pages


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@contextlib.contextmanager
def _forked_child(report=None):
    """A child forked here that stays alive (its pages shared) until the block ends; ``report(child)``
    runs in the child first and its bytes come back as the value of the context."""
    ready_r, ready_w = os.pipe()
    stop_r, stop_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then wait for the parent
        try:
            os.close(ready_r)
            os.close(stop_w)
            os.write(ready_w, report() if report else b"ok")
            os.close(ready_w)
            os.read(stop_r, 1)
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(stop_r)
    reported = os.read(ready_r, 1 << 16)
    os.close(ready_r)
    try:
        yield reported
    finally:
        os.close(stop_w)
        os.waitpid(pid, 0)


def test_idle_buffers_are_wiped_in_the_child_held_ones_kept():
    pool = BufferPool(capacity=4)
    held = pool.get(SHAPE)
    held[...] = 7
    idle = pool.get(SHAPE)
    assert idle is not held
    idle[...] = 9
    del idle  # back to the pool's own reference: idle
    child_view = pool._arrays  # the child reads the pool's arrays as they were at the fork

    def report() -> bytes:
        return bytes([int(child_view[0].max()), int(child_view[1].max()), int(held.min())])

    with _forked_child(report) as seen:
        assert seen == bytes([7, 0, 7])  # held: the user's pixels; idle: zeros (never read by a child)
        assert int(pool._arrays[1].max()) == 9  # the parent's own pages are untouched


def test_a_view_of_one_image_keeps_its_buffer():
    """A view of one slot (what a per-sample ``transform=`` gets) holds the pooled buffer: never handed out
    again while it lives, and a child sees its pixels."""
    pool = BufferPool(capacity=4)
    batch = pool.get(SHAPE)
    batch[...] = 5
    image = batch[3]  # a view of one image, the batch itself dropped
    del batch
    other = pool.get(SHAPE)
    other[...] = 6
    assert int(image.max()) == 5  # not overwritten
    with _forked_child(lambda: bytes([int(image.min()), int(image.max())])) as seen:
        assert seen == bytes([5, 5])


def test_no_pooled_buffer_is_handed_out_between_the_marking_and_the_fork():
    """Between the marking (the before hook) and the fork's end (the after hook) get() hands out a fresh buffer:
    a pooled one marked idle, then filled and handed out by another thread before the fork, would be zeros in
    the child. No lock: a signal handler's fork interrupting get() on the same thread must not deadlock."""
    pool = BufferPool(capacity=4)
    pooled = pool.get(SHAPE)  # then idle: marked wipe-on-fork below
    pooled_id = id(pooled)
    del pooled
    buffer_pool._before_fork()
    try:
        during = pool.get(SHAPE)
        assert id(during) != pooled_id and len(pool._arrays) == 1  # fresh, and not kept by the pool
    finally:
        buffer_pool._after_fork_in_parent()
    del during
    assert id(pool.get(SHAPE)) == pooled_id  # the pooled one again


def test_hooks_running_inside_get_on_the_same_thread_do_not_deadlock():
    """A fork from a signal handler runs the hooks on the thread the handler interrupted, which may be inside
    get() (a lock taken there deadlocked, 2 s into 333 signals/s): here the hooks run from inside get()."""
    pool = BufferPool(capacity=4)
    pool.get(SHAPE)

    forked: list[bool] = []

    class ForkingList(list):
        def __getitem__(self, index):  # get() reads its arrays: as if a handler forked right there, once
            if not forked:
                forked.append(True)
                buffer_pool._before_fork()  # the hooks read the arrays too
                buffer_pool._after_fork_in_parent()
            return super().__getitem__(index)

    pool._arrays = ForkingList(pool._arrays)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (pool.get(SHAPE), done.set()), daemon=True)
    thread.start()
    if not done.wait(timeout=10):  # what every thread was doing, for the failure's message
        with tempfile.TemporaryFile("w+") as stacks:
            faulthandler.dump_traceback(stacks, all_threads=True)
            stacks.seek(0)
            pytest.fail(f"get() with the hooks inside it did not return within 10 s; threads:\n{stacks.read()}")
    assert forked
    assert buffer_pool._FORKS_MARKING[0] == 0


def test_small_buffers_stay_ordinary_memory():
    pool = BufferPool(capacity=2)
    pool.get((1, 16, 16, 3))
    assert pool._mappings == [None]  # a whole page each would cost more than the fork's copy


def test_parent_writes_after_a_fork_without_copy_on_write_faults():
    pool = BufferPool(capacity=4)
    arrays = [pool.get(SHAPE) for _ in range(3)]
    for array in arrays:
        array[...] = 1
    plain = np.ones(SHAPE, dtype=np.uint8)  # what the pool used before: ordinary heap memory
    del arrays
    pages = plain.nbytes // resource.getpagesize()
    with _forked_child():
        before = _faults()
        for _ in range(3):
            pool.get(SHAPE)[...] = 2  # the same idle array each time
        pooled = _faults() - before
        before = _faults()
        plain[...] = 2
        copied = _faults() - before
    assert pooled < pages // 10, (pooled, pages)
    assert copied > pages // 2, (copied, pages)  # the check sees copy-on-write where it happens


def test_scratch_buffer_is_wiped_in_the_child():
    buffer = scratch_buffer(1 << 20)
    buffer[:4] = b"abcd"
    with _forked_child(lambda: bytes(buffer[:4])) as seen:
        assert seen == b"\0\0\0\0"
        assert bytes(buffer[:4]) == b"abcd"


def _epoch_after_a_fork(shards, monkeypatch, wipe: bool) -> tuple[int, int]:
    """Extra page faults of an ImageLoader epoch run while a forked child lives (against an epoch without one),
    and the pages of the loader's pooled batch buffers; checks the batches equal those of an unforked loader."""
    monkeypatch.setattr(buffer_pool, "WIPE_ON_FORK", wipe)
    options = dict(batch_size=8, image_size=448, num_workers=2, seed=5)
    loader, reference = ImageLoader(shards, **options), ImageLoader(shards, **options)
    for _ in range(2):  # warm: the pool's buffers and the threads' scratch are written
        for _ in loader:
            pass
    before = _faults()
    for _ in loader:
        pass
    unforked = _faults() - before
    for _ in range(4):
        want = [(_digest(images), labels.tolist()) for images, labels in reference]  # epoch 3's, as the loader's below
    with _forked_child():
        before = _faults()
        got = [(_digest(images), labels.tolist()) for images, labels in loader]  # no copies: they would fault
        forked = _faults() - before
    assert got == want
    pooled = sum(array.nbytes for array in loader._buffers._arrays) // resource.getpagesize()  # rewritten each epoch
    loader.close()
    reference.close()
    return forked - unforked, pooled


def test_loader_epoch_after_a_fork(image_shards, monkeypatch):
    """An epoch of ImageLoader after a fork, the child alive: the same batches as without the fork, and without
    a copy-on-write fault for each page of its pooled batch buffers, as plain memory takes (the rest, a few
    hundred, are the interpreter's own pages and the heap's: a camera photo's bytes, read into the heap, are
    copied too, once per page and fork)."""
    wiped, pooled = _epoch_after_a_fork(image_shards, monkeypatch, wipe=True)
    copied, plain_pooled = _epoch_after_a_fork(image_shards, monkeypatch, wipe=False)
    assert pooled == plain_pooled
    assert copied - wiped > pooled // 2, (copied, wiped, pooled)
    assert wiped < pooled // 2, (wiped, pooled)


def _digest(images) -> bytes:
    return hashlib.blake2b(images.permute(0, 2, 3, 1).contiguous().numpy()).digest()  # NHWC memory: no copy


def test_a_forked_child_iterates_its_copy_of_the_loader(image_shards):
    """A child forked after the parent used its loader (``fork`` multiprocessing, a notebook DDP strategy)
    iterates its copy with threads of its own: the batches the parent's next epoch gives, no hang (the parent's
    executor threads do not exist in the child)."""
    loader = ImageLoader(image_shards, batch_size=8, image_size=32, num_workers=2, seed=3)
    for _ in loader:
        pass

    def child_epoch() -> bytes:
        signal.alarm(60)  # a hang ends the child, and the empty report fails the test
        return b"".join(_digest(images) + bytes(labels.tolist()) for images, labels in loader)

    with _forked_child(child_epoch) as seen:
        assert seen == b"".join(_digest(images) + bytes(labels.tolist()) for images, labels in loader)
    loader.close()


def test_a_forked_child_is_not_held_by_the_parents_gate(image_shards):
    """num_workers="auto": the parent's decode threads inside the tuner's gate at the fork (a suspended
    mid-epoch pass) count as holders in the child's copy, where they do not exist; the child's pass gets a gate
    of its own instead of waiting on it forever."""
    loader = ImageLoader(image_shards, batch_size=8, image_size=32, num_workers="auto", cpu_budget=2, seed=3)
    for _ in loader:
        pass
    loader._gate._held = loader._gate.limit  # as many holders as the gate admits: the parent's threads, mid-decode

    def child_epoch() -> bytes:
        signal.alarm(60)  # a hang ends the child, and the empty report fails the test
        return b"".join(_digest(images) for images, _ in loader)

    try:
        with _forked_child(child_epoch) as seen:
            loader._gate._held = 0
            assert seen == b"".join(_digest(images) for images, _ in loader)  # the parent's own next epoch
    finally:
        loader.close()


def test_pools_made_by_another_thread_during_forks_leave_no_buffer_wiped():
    """Another thread making pools (loaders made and dropped) while forks mark them: the hooks' copy of the live
    pools once raised, every pool went unmarked, and a buffer left wipe-on-fork was zeros in the next child."""
    pool = BufferPool(capacity=1)
    others = [BufferPool(1) for _ in range(3000)]  # a long copy: the window the other thread's pools hit
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            made = [BufferPool(1) for _ in range(50)]
            del made

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    zeros = forks = 0
    try:
        deadline = time.monotonic() + 30  # forks counted, not time: a loaded machine forks slower
        while time.monotonic() < deadline and forks < 60:
            held = None if forks % 2 == 0 else pool.get((1 << 20,))  # idle at even forks: marked wipe-on-fork
            if held is not None:
                held[:] = 7
            pid = os.fork()
            if pid == 0:
                os._exit(0 if held is None or held.min() == 7 else 1)
            zeros += os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0
            forks += 1
            held = None
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(switch)
    assert forks > 50 and zeros == 0, (forks, zeros)
    del others


def test_a_pass_continued_in_a_forked_child_is_one_clear_error(image_shards):
    """An iterator the parent started, continued in a child: its batches are queued on the parent's threads,
    which the child lacks; one error saying so (it waited forever), and the parent's pass goes on."""
    from dataio.pipeline.threaded_batches import ForkedPassError

    loader = ImageLoader(image_shards, batch_size=8, image_size=32, num_workers=2, seed=3)
    batches = iter(loader)
    next(batches)

    def child_continues() -> bytes:
        signal.alarm(60)
        try:
            next(batches)
        except ForkedPassError as e:
            return b"refused" if "start a new pass here" in str(e) else b"other message"
        return b"continued"

    with _forked_child(child_continues) as seen:
        assert seen == b"refused"
    assert sum(1 for _ in batches) == len(loader) - 1  # the parent's pass, whole
    loader.close()


def test_buffers_are_pooled_by_shape_and_dtype_and_a_full_pool_replaces_an_idle_one():
    """Float batches (``normalize=True`` on the CPU) pool beside uint8 ones; when a resolution schedule moves on,
    an idle buffer of an earlier size gives its place to the new one instead of staying for good."""
    pool = BufferPool(capacity=2)
    small = pool.get((4, 8, 8, 3), np.float32)
    assert small.dtype == np.float32 and pool.get((4, 8, 8, 3)).dtype == np.uint8
    address = small.ctypes.data
    del small
    again = pool.get((4, 8, 8, 3), np.float32)
    assert again.ctypes.data == address  # idle: handed out again
    held = again
    larger = pool.get((4, 16, 16, 3), np.float32)  # full: the idle uint8 one is replaced, the held one kept
    assert [a.shape for a in pool._arrays] == [(4, 8, 8, 3), (4, 16, 16, 3)] and pool._arrays[0] is held
    assert larger is pool._arrays[1]
    fresh = pool.get((4, 16, 16, 3), np.float32)  # both held: a fresh one, not pooled
    assert fresh is not larger and len(pool._arrays) == 2
