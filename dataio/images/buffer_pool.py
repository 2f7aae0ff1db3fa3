"""Recycle batch buffers once nothing uses them, to avoid page-faulting fresh memory, also across a fork.

A fresh 38 MB batch (256x224x224x3) costs ~10k page faults on first touch,
measured at ~12% of loader throughput on 2 cores. Tensors made with
``torch.from_numpy`` hold a reference to their ndarray, so a pooled array
whose reference count is back to the pool's own holds no live tensor and
can be reused: a batch the user kept is never overwritten.

A ``fork`` (a ``DataLoader`` starting its workers, e.g. a validation loader
beside dataio's training loader) makes every page of the parent
copy-on-write: the next batch written into a pooled buffer page-faults and
copies each page again. On the 2-core VM the first epoch after a DataLoader
forked its workers took 9,100 such faults per 1,000 images (64-image
batches) and spent 315 CPU us per image in the crop-resize instead of 100
(``bench images``, the standard recipe timed in turns with dataio). So the
buffers are anonymous private mappings of their own, and just before a fork
those nobody outside the pool holds are marked ``MADV_WIPEONFORK``: the child
gets zeros there (it never reads them: a pooled buffer is written before
it is handed out), the parent keeps its pages writable. Buffers a user still
holds, whole or a view of one image, stay copy-on-write, so a child sees
their pixels; no pooled buffer is handed out between the marking and the
fork (a fresh one is), and after it every buffer is copy-on-write again
(``MADV_KEEPONFORK``), so no mark outlives its fork.
"""

from __future__ import annotations

import mmap
import os
import sys
import weakref

import numpy as np

# Linux's values (uapi/asm-generic/mman-common.h); Python's mmap module names neither (3.11)
MADV_WIPEONFORK = getattr(mmap, "MADV_WIPEONFORK", 18)
MADV_KEEPONFORK = getattr(mmap, "MADV_KEEPONFORK", 19)
HUGEPAGE_BYTES = 4 << 20  # numpy's own threshold for asking transparent huge pages of an allocation
MAPPED_BYTES = 1 << 20  # smaller buffers stay ordinary memory: a fork copies few pages of them (and a mapping
# takes whole pages: 3,000 kept 768-byte batches took 16 MiB mapped against 5 MiB)


def _refs_in_list_and_local() -> int:
    """What getrefcount reports for an array referenced only by one list and a local variable (``get`` and
    ``mark_for_fork`` read it so): counted, not assumed."""
    held = [np.empty(0)]
    array = held[0]
    return sys.getrefcount(array)


_POOL_AND_LOCAL_REFS = _refs_in_list_and_local()


def _anonymous_mapping(size: int) -> mmap.mmap:
    """``size`` bytes of private anonymous memory, a mapping of its own (untouched: no page yet)."""
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


def _wipe_on_fork_works() -> bool:
    """Whether this kernel takes ``MADV_WIPEONFORK`` (Linux >= 4.14) on a private anonymous mapping."""
    if not sys.platform.startswith("linux") or not hasattr(mmap, "MAP_ANONYMOUS"):
        return False
    try:
        probe = _anonymous_mapping(mmap.PAGESIZE)
        try:
            probe.madvise(MADV_WIPEONFORK)
            probe.madvise(MADV_KEEPONFORK)
        finally:
            probe.close()
    except (OSError, ValueError, AttributeError):
        return False
    return True


WIPE_ON_FORK = _wipe_on_fork_works()


def _private_array(shape: tuple[int, ...], dtype: np.dtype) -> tuple[np.ndarray, mmap.mmap | None]:
    """An array of ``shape`` and ``dtype`` in a private anonymous mapping of its own (or plain memory: small, or
    without ``WIPE_ON_FORK``), and the mapping. The array is the base of every view of it (``np.ndarray`` over the
    mapping, not a reshape of a flat one), so a view of one image still counts as a reference to it."""
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if not WIPE_ON_FORK or size < MAPPED_BYTES:
        return np.empty(shape, dtype=dtype), None
    mapping = _anonymous_mapping(size)
    if size >= HUGEPAGE_BYTES and hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            mapping.madvise(mmap.MADV_HUGEPAGE)  # as numpy asks for its large arrays: fewer TLB misses
        except OSError:
            pass
    return np.ndarray(shape, dtype=dtype, buffer=mapping), mapping


def scratch_buffer(size: int) -> bytearray | mmap.mmap:
    """A writable buffer of ``size`` bytes for a thread's scratch (always written before it is read), wiped in
    a forked child rather than copied on the parent's next write (the decode thread's region buffer: 600 of the
    9,700 faults per 1,000 images after a fork, above)."""
    if not WIPE_ON_FORK:
        return bytearray(size)
    mapping = _anonymous_mapping(size)
    mapping.madvise(MADV_WIPEONFORK)
    return mapping


# Forks between their before and after hooks (a count: several threads may fork at once). While one is
# marking, get() hands out a fresh buffer rather than an idle pooled one: one marked idle, then taken and
# filled by another thread before the fork, would be zeros in the child. No lock: a fork from a signal handler
# that interrupted get() on the same thread deadlocked on one, and a hook interrupted by a raising signal could
# leave one held or release another thread's. An after hook that never ran leaves the count up: get() then
# allocates fresh buffers (page faults, never wrong pixels).
_FORKS_MARKING = [0]


class BufferPool:
    """Hands out arrays of a shape and dtype (uint8 unless asked), reusing those no longer referenced elsewhere."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._arrays: list[np.ndarray] = []
        self._mappings: list[mmap.mmap | None] = []  # each array's mapping, same order
        _POOLS.add(self)  # a fork's hooks copying the set meanwhile copy it again (_live_pools)

    def get(self, shape: tuple[int, ...], dtype: np.dtype | type = np.uint8) -> np.ndarray:
        """An array of ``shape`` and ``dtype`` nobody else holds: an idle pooled one, else a fresh one, pooled in
        place of an idle one of another shape when the pool is full (a resolution schedule's earlier sizes give way
        one buffer per such call: at most ``capacity`` buffers are kept, and a float batch of 256 x 224 px is
        154 MB)."""
        dtype = np.dtype(dtype)
        stale = None  # an idle buffer of another shape or dtype
        for i in range(len(self._arrays)):
            array = self._arrays[i]
            # The list's, this local's and getrefcount's argument's references: nothing else holds it.
            if sys.getrefcount(array) > _POOL_AND_LOCAL_REFS:
                continue
            if array.shape == shape and array.dtype == dtype:
                # Read after the local reference is taken: a marking from here on sees the buffer in use.
                if not _FORKS_MARKING[0]:
                    return array
                break
            stale = i if stale is None else stale
        array, mapping = _private_array(shape, dtype)
        if _FORKS_MARKING[0]:
            return array
        if len(self._arrays) < self.capacity:
            self._arrays.append(array)
            self._mappings.append(mapping)
        elif stale is not None:  # dropped, not closed: its mapping goes with the array's last reference
            self._arrays[stale], self._mappings[stale] = array, mapping
        return array

    def clear(self) -> None:
        """Let go of every pooled buffer (a closed loader's): those the user holds stay theirs, the rest are freed.
        Each list is rebound, not emptied in place: a fork's marking that meets the new one mid-way stops at an
        IndexError (``_mark_all`` goes on), never pairing one buffer's idleness with another's mapping."""
        self._mappings = []
        self._arrays = []

    def mark_for_fork(self, forking: bool) -> None:
        """``forking``: the idle buffers wipe-on-fork, those in use (a user's tensor or view, or a batch being
        filled: their pixels may matter to the child) copy-on-write; after the fork all copy-on-write again."""
        for i in range(min(len(self._arrays), len(self._mappings))):  # get() appends the array first
            array, mapping = self._arrays[i], self._mappings[i]
            if mapping is None:
                continue
            idle = forking and sys.getrefcount(array) <= _POOL_AND_LOCAL_REFS
            try:
                mapping.madvise(MADV_WIPEONFORK if idle else MADV_KEEPONFORK)
            except (OSError, ValueError):  # closed, or the kernel refused: copy-on-write as usual
                pass


_POOLS: weakref.WeakSet[BufferPool] = weakref.WeakSet()


def _live_pools() -> list[BufferPool]:
    """The live pools. A pool added while the hooks copy the set made the copy raise (``Set changed size during
    iteration``) and every pool went unmarked: one left wipe-on-fork was zeros in the next child, held or not (804
    of 7,399 forks with a thread making loaders); such a copy is taken again. No lock: a lock held by another thread
    (one a collection inside it left waiting on a thread that waits for the lock) stopped a fork's hooks for good
    (tests/images/test_fork_buffers.py, in the whole suite); removals are the WeakSet's own business."""
    while True:
        try:
            return list(_POOLS)
        except RuntimeError:  # changed size during the copy: a pool was added
            continue


def _mark_all(forking: bool) -> None:
    for pool in _live_pools():
        try:
            pool.mark_for_fork(forking)
        except Exception:  # noqa: BLE001 - a fork must go on; the other pools are still marked
            pass


def _before_fork() -> None:
    _FORKS_MARKING[0] += 1
    _mark_all(True)


def _after_fork_in_parent() -> None:
    _FORKS_MARKING[0] = max(0, _FORKS_MARKING[0] - 1)
    _mark_all(False)


def _after_fork_in_child() -> None:
    _FORKS_MARKING[0] = 0  # no fork of another of the parent's threads goes on here
    _mark_all(False)  # the marks came along: a fork past these hooks (a C library's) must not wipe held buffers


if WIPE_ON_FORK:
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)
