"""Normalise each decoded image into its float slot on the decode thread: the CPU device's ``normalize=True``.

On a GPU the uint8 batch is copied (4x fewer bytes than float) and normalised there. On the CPU,
normalising the whole batch after it is decoded costs three passes over a fresh 154 MB float batch
(256 x 224 px): 230 us of the loader thread's CPU per image, and as much again in page faults on the
new memory (147 a pair, ~10 us each on the 2-core VM), 550 us per image in all, a third of a pair's cost
in ``dataio bench pairs``. Here each image goes from the decode thread's uint8 scratch (just written, in
cache) into its slot of a pooled float batch in one pass: 33 us per 224 px image through the C kernel
``dataio.augment._normalize_cpu`` (numpy: 350 us interleaved). The values are bit-identical to
``Normalize``'s (the same float32 subtraction then division).
"""

from __future__ import annotations

import numpy as np

from dataio.formats.fallback_log import warn_once

try:
    from dataio.augment import _normalize_cpu
except ImportError:  # built without a C compiler: numpy does the same arithmetic, slower
    _normalize_cpu = None

AVAILABLE = _normalize_cpu is not None
WITHOUT_KERNEL = ("dataio.augment._normalize_cpu is not built (no C compiler when torch-dataio was installed): "
                  "normalize=True on the CPU uses numpy, about 10x the CPU time per image; install gcc, then "
                  "reinstall torch-dataio")


class HostNormalize:
    """``(x - 255 * mean) / (255 * std)`` of one uint8 HWC image into a float32 slot, HWC or ``planar`` CHW."""

    def __init__(self, mean: tuple[float, float, float], std: tuple[float, float, float], *, planar: bool) -> None:
        # the same float32 values as Normalize's tensors (float64 products, then rounded once)
        self.mean = np.array([m * 255 for m in mean], dtype=np.float32)
        self.std = np.array([s * 255 for s in std], dtype=np.float32)
        self.planar = planar
        self._mean_bytes, self._std_bytes = self.mean.tobytes(), self.std.tobytes()

    def slot_shape(self, size: int) -> tuple[int, int, int]:
        """One image's float slot: (3, S, S) planar, else (S, S, 3)."""
        return (3, size, size) if self.planar else (size, size, 3)

    def __call__(self, image: np.ndarray, slot: np.ndarray) -> None:
        """Write ``image`` (S, S, 3) uint8, C-contiguous, normalised into ``slot`` (``slot_shape``, float32)."""
        if image.shape[-1] != 3 or slot.shape != self.slot_shape(image.shape[0]) or image.shape[0] != image.shape[1]:
            raise ValueError(f"HostNormalize: image {image.shape} does not fit slot {slot.shape}")
        if image.dtype != np.uint8 or slot.dtype != np.float32:  # the kernel sees bytes: it would take any 4-byte slot
            raise ValueError(f"HostNormalize normalises a uint8 image into a float32 slot, got {image.dtype} into "
                             f"{slot.dtype}")
        if _normalize_cpu is not None and image.flags.c_contiguous and slot.flags.c_contiguous:
            _normalize_cpu.normalize(image, slot, self._mean_bytes, self._std_bytes, self.planar)
            return
        if _normalize_cpu is None:
            warn_once("normalize-kernel", WITHOUT_KERNEL)
        source = image.transpose(2, 0, 1) if self.planar else image
        mean, std = (self.mean[:, None, None], self.std[:, None, None]) if self.planar else (self.mean, self.std)
        np.subtract(source, mean, out=slot, dtype=np.float32)
        np.divide(slot, std, out=slot)
