"""RandAugment on uint8 CPU batches through the C kernel ``dataio.augment._randaugment_cpu``.

Whole-batch tensor ops are the right shape for a GPU, but on a CPU each op is
several passes over a 38 MB batch converted to float: slower than PIL image by
image (see ``dataio bench augment``). The kernel instead takes each image through
its own ops while it sits in cache, in uint8 with PIL's rounding, with the GIL
released; the batch is cut into slices that ``torch.get_num_threads()`` threads
share. The output is allocated through numpy, which asks the kernel for
transparent huge pages (about a third of the page-fault cost). The
per-sample parameters are the ones ``RandAugment.draw`` made, so the torch and
kernel paths apply the same ops and magnitudes and differ only in rounding.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

try:
    from dataio.augment import _randaugment_cpu
except ImportError:  # built without a C compiler: RandAugment uses torch ops
    _randaugment_cpu = None

AVAILABLE = _randaugment_cpu is not None
# RandAugment(2, 9) on a (64, 3, 224, 224) uint8 batch, one thread: 2,300 us of CPU per image through
# torch ops against 250 through the kernel
WITHOUT_KERNEL = ("dataio.augment._randaugment_cpu is not built (no C compiler when torch-dataio was installed): "
                  "RandAugment on uint8 CPU batches uses torch ops, about 9x the CPU time per image; install gcc, "
                  "then reinstall torch-dataio")
SLICES_PER_THREAD = 8
_pool: ThreadPoolExecutor | None = None


def _forget_pool() -> None:
    """In a forked child (a DataLoader worker, say) the parent's pool threads do not exist: start afresh."""
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool)


def _slices(n: int, parts: int) -> list[tuple[int, int]]:
    bounds = np.linspace(0, n, parts + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def apply(images: torch.Tensor, codes: np.ndarray, params: np.ndarray, fill: int) -> torch.Tensor:
    """A new uint8 (N, 3, H, W) batch, augmented, in the input's layout (channels_last is the fast one)."""
    global _pool
    if _randaugment_cpu is None:
        raise RuntimeError("dataio.augment._randaugment_cpu was not built (no C compiler at install time)")
    planar = images.is_contiguous() and not images.is_contiguous(memory_format=torch.channels_last)
    src = images.contiguous(memory_format=torch.channels_last)
    n, _, height, width = src.shape
    # numpy asks for transparent huge pages on big arrays (torch does not): a third of the page faults' cost
    out = torch.from_numpy(np.empty((n, height, width, 3), np.uint8)).permute(0, 3, 1, 2)
    codes, params = np.ascontiguousarray(codes, np.int32), np.ascontiguousarray(params, np.float64)
    args = (src.permute(0, 2, 3, 1).numpy(), out.permute(0, 2, 3, 1).numpy(), n, height, width, codes, params,
            codes.shape[1], fill)
    threads = min(torch.get_num_threads(), n)
    if threads <= 1:
        _randaugment_cpu.apply(*args, 0, n)
    else:
        if _pool is None or _pool._max_workers < threads:  # noqa: SLF001 (grown once, then reused)
            _pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dataio-randaugment")
        # several slices per thread, taken as threads come free: ops differ in cost (a rotation is
        # 10x a posterize) and a shared machine's core can stall, so equal halves finish unevenly
        slices = _slices(n, min(n, threads * SLICES_PER_THREAD))
        for future in [_pool.submit(_randaugment_cpu.apply, *args, lo, hi) for lo, hi in slices]:
            future.result()
    return out.contiguous() if planar else out
