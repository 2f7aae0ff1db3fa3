"""Multi-crop views' photometric ops on the CPU through the C kernel ``dataio.augment._views_cpu``.

``apply_view`` takes one decoded HWC image on a decode thread (the GIL released, scratch per thread, so several
threads call it at once) and writes uint8 HWC, or float32 normalised HWC or CHW, into the batch's slot;
``apply_views_cpu`` is ``view_ops.apply_views`` for a CPU batch, its images shared among threads. Without the
kernel both fall back to the torch reference (``view_ops.apply_views``), said once per process.

Exactness against the torch reference ``view_ops.apply_views`` (tested):

- uint8: within 1 level. Both start from the same float32 values (``u8 * float32(1/255)``) and do brightness,
  saturation, grayscale, the contrast blend and solarize in the same float32 operations; three things differ by
  rounding only: the contrast mean (a float32 cascade sum in torch, double sums of float32 lanes here), the blur
  (symmetric taps paired here, so ``t (a + b)`` for ``t a + t b``) and the hue (one division in sextants here, five
  in torchvision's HSV round trip). Each is within a few float32 ulps of the values (about 1e-6 of [0, 1] after a
  chain), which moves ``floor(255 x + 0.5)`` by one level only where ``255 x`` sits that close to ``k + 0.5``, and
  flips solarize only where ``x`` sits that close to the threshold (``x`` against ``1 - x`` there: one level).
- float32 normalised: within 1e-5 of max(1, |value|), the same ~1e-6 divided by std (0.225 for ImageNet), except a
  solarize flip as above, where the two values are ``x`` and ``1 - x`` (1/255 / std apart).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from dataio.augment.view_ops import ViewParams, apply_views, check_arguments, normalisation
from dataio.formats.fallback_log import warn_once

try:
    from dataio.augment import _views_cpu
except ImportError:  # built without a C compiler: the torch reference does the same ops
    _views_cpu = None

AVAILABLE = _views_cpu is not None
WITHOUT_KERNEL = ("dataio.augment._views_cpu is not built (no C compiler when torch-dataio was installed): "
                  "multi-crop view ops on the CPU use torch ops, about 20x the CPU time per view; install gcc, then "
                  "reinstall torch-dataio")
U8, FLOAT_HWC, FLOAT_PLANES = 0, 1, 2  # the kernel's output layouts
SLICES_PER_THREAD = 4
_pool: ThreadPoolExecutor | None = None


def _forget_pool() -> None:
    """In a forked child (a DataLoader worker, say) the parent's pool threads do not exist: start afresh."""
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool)


def _norm_bytes(norm: tuple[float, ...] | None) -> tuple[bytes, bytes]:
    if norm is None:
        return b"", b""
    values = np.array(norm, dtype=np.float32)
    return values[:3].tobytes(), values[3:].tobytes()


def apply_view(image: np.ndarray, params: ViewParams, index: int, out: np.ndarray, *,
               mean: Sequence[float] | None = None, std: Sequence[float] | None = None, planar: bool = False) -> None:
    """Sample ``index`` of ``params`` applied to ``image`` (H, W, 3) uint8, written into ``out``: (H, W, 3) uint8,
    or with ``mean``/``std`` float32 (H, W, 3), or (3, H, W) when ``planar``. Both arrays C-contiguous; the
    kernel checks the parameters and that the image is large enough for the blur (ValueError)."""
    if not (isinstance(image, np.ndarray) and image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
            and image.flags.c_contiguous):
        got = f"{image.dtype} {image.shape}" if isinstance(image, np.ndarray) else type(image).__name__
        raise ValueError(f"image must be a C-contiguous uint8 (H, W, 3) array, got {got}")
    if not isinstance(params, ViewParams):
        raise ValueError(f"params must be ViewParams (draw_view_params), got {type(params).__name__}")
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < len(params):
        raise ValueError(f"index must be an int in 0..{len(params) - 1}, got {index!r:.20}")
    norm = normalisation(mean, std)
    if planar and norm is None:
        raise ValueError("planar output is float32: give mean and std")
    height, width = image.shape[:2]
    shape = (3, height, width) if planar else (height, width, 3)
    dtype = np.uint8 if norm is None else np.float32
    if not (isinstance(out, np.ndarray) and out.dtype == dtype and out.shape == shape and out.flags.c_contiguous
            and out.flags.writeable):
        got = f"{out.dtype} {out.shape}" if isinstance(out, np.ndarray) else type(out).__name__
        raise ValueError(f"out must be a writable C-contiguous {np.dtype(dtype)} {shape} array, got {got}")
    if _views_cpu is None:
        warn_once("views-kernel", WITHOUT_KERNEL)
        result = apply_views(torch.from_numpy(image).permute(2, 0, 1)[None], params[index:index + 1], mean=mean,
                             std=std)[0]
        out[...] = (result if planar else result.permute(1, 2, 0)).numpy()
        return
    plan, values = params.host_arrays
    layout = U8 if norm is None else FLOAT_PLANES if planar else FLOAT_HWC
    _views_cpu.apply(image, out, 1, height, width, plan[index:index + 1], values[index:index + 1],
                     params.blur_kernel, params.solarize_threshold, *_norm_bytes(norm), layout, 0, 1)


def apply_views_cpu(images: torch.Tensor, params: ViewParams, *, out: torch.Tensor | None = None,
                    mean: Sequence[float] | None = None, std: Sequence[float] | None = None) -> torch.Tensor:
    """``view_ops.apply_views`` for a CPU batch, through the kernel (its images shared among
    ``torch.get_num_threads()`` threads); the result in the images' layout unless ``out`` is given."""
    global _pool
    norm = check_arguments(images, params, out, mean, std)
    if _views_cpu is None or images.device.type != "cpu" or images.numel() == 0:
        if _views_cpu is None and images.device.type == "cpu":
            warn_once("views-kernel", WITHOUT_KERNEL)
        return apply_views(images, params, out=out, mean=mean, std=std)
    planar = _planes(images)
    src = images.contiguous(memory_format=torch.channels_last)
    n, _, height, width = src.shape
    layout = U8 if norm is None else FLOAT_PLANES if (planar if out is None else _planes(out)) else FLOAT_HWC
    channels_last = out is not None and out.is_contiguous(memory_format=torch.channels_last)
    if out is not None and (_planes(out) if layout == FLOAT_PLANES else channels_last):
        target = out if layout == FLOAT_PLANES else out.permute(0, 2, 3, 1)  # written in place
    else:  # numpy asks for transparent huge pages on big arrays (torch does not): fewer page faults
        shape = (n, 3, height, width) if layout == FLOAT_PLANES else (n, height, width, 3)
        target = torch.from_numpy(np.empty(shape, np.uint8 if norm is None else np.float32))
    plan, values = params.host_arrays
    run = functools.partial(_views_cpu.apply, src.permute(0, 2, 3, 1).numpy(), target.numpy(), n, height, width, plan,
                            values, params.blur_kernel, params.solarize_threshold, *_norm_bytes(norm), layout)
    threads = min(torch.get_num_threads(), n)
    if threads <= 1:
        run(0, n)
    else:
        if _pool is None or _pool._max_workers < threads:  # noqa: SLF001 (grown once, then reused)
            _pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dataio-views")
        # several slices per thread, taken as threads come free: views differ in cost (blur, hue, contrast)
        bounds = np.linspace(0, n, min(n, threads * SLICES_PER_THREAD) + 1).round().astype(int)
        for future in [_pool.submit(run, int(lo), int(hi))
                       for lo, hi in zip(bounds[:-1], bounds[1:], strict=True) if hi > lo]:
            future.result()
    result = target if layout == FLOAT_PLANES else target.permute(0, 3, 1, 2)
    if out is None:
        return result.contiguous() if planar else result
    return out if result.data_ptr() == out.data_ptr() else out.copy_(result)


def _planes(tensor: torch.Tensor) -> bool:
    return tensor.is_contiguous() and not tensor.is_contiguous(memory_format=torch.channels_last)

