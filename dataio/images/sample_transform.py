"""The ``transform=`` hook of ``ImageLoader``: a user's callable on each decoded crop, on the decode threads.

Contract: ``transform(image)`` gets a ``torch.uint8`` tensor of shape
``(3, S, S)`` (RGB, CHW) that is a view of the sample's slot in the
preallocated NHWC batch (``normalize=True`` on the CPU: of the decode thread's
uint8 image, normalised into the float batch after; ``image_batches`` gives the
thread a fresh one when the transform keeps its view), after the crop, resize
and flip. It returns a uint8
tensor of the same shape (written back into the slot), or the view itself
after changing it in place (nothing to copy). Anything else (float, another
size, not a tensor) is a ``ConfigError`` naming ``transform`` and the sample:
float work belongs in ``batch_transform=``, on the device, after the copy.

PIL-only transforms (torchvision v1's ``ToTensor``, timm's PIL ops: one recognised as ``ShardDataset``
recognises it, ``dataio.images.pil_transform``) are given each crop as a PIL image, and a PIL result is
taken back as uint8, with one line on the ``dataio`` logger. A whole PIL pipeline that returns float
(``ToTensor``, ``Normalize``: timm's ``create_transform``) is refused in one line pointing to
``ShardDataset(..., to_pil=True)``, whose items may be anything.

Randomness: a callable with a ``generator`` parameter is called as
``transform(image, generator=g)``, ``g`` a ``torch.Generator`` seeded per
sample from the batch's seed key (seed, epoch, rank, batch position): the same
draws for any ``num_workers`` and after a resume. Other callables (torchvision,
albumentations) draw from their library's global generator, which dataio does
not reseed: shared by the decode threads, their draws depend on thread timing.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable

import numpy as np
import torch

from PIL import Image

from dataio.formats.errors import ConfigError
from dataio.images.pil_transform import as_uint8, hint, pil_only, transform_sample

_generators = threading.local()  # each decode thread's generator, reseeded per sample


def takes_generator(fn: Callable) -> bool:
    """Whether ``fn`` accepts a ``generator=`` keyword (then dataio passes a per-sample seeded one)."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    param = parameters.get("generator")
    return param is not None and param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY)


class SampleTransform:
    """Apply ``fn`` to one slot of a uint8 NHWC batch, checking what it returns."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        self.seeded = takes_generator(fn)
        self.pil_input = pil_only(fn)  # learnt on the first crop otherwise (any thread; a bool, set once)
        if self.pil_input:
            hint(fn, "takes PIL images (torchvision v1)", loader=True)

    def __call__(self, slot: np.ndarray, seed: int | None, where: Callable[[], str]) -> None:
        """Transform ``slot`` ((S, S, 3) uint8, written in place); ``where()`` names the sample in errors."""
        image = torch.from_numpy(slot).permute(2, 0, 1)  # CHW view of the slot: no copy
        if self.seeded:
            generator = getattr(_generators, "generator", None)
            if generator is None:
                generator = _generators.generator = torch.Generator()
            generator.manual_seed(int(seed or 0))
            out = self.fn(image, generator=generator)
        else:
            out, self.pil_input = transform_sample(self.fn, image, self.pil_input, loader=True)
        if out is image:
            return
        if isinstance(out, Image.Image):
            out = as_uint8(out)
        elif self.pil_input and isinstance(out, torch.Tensor) and out.is_floating_point():
            raise ConfigError(f"{{0}} {type(self.fn).__name__} takes PIL images and returns {out.dtype} "
                              f"{tuple(out.shape)} (ToTensor/Normalize)".replace("torch.", "") + ": the loader's "
                              "transform= must return uint8 crops; give the whole pipeline to dataio.ShardDataset(folder, "
                              "transform=..., to_pil=True) read by dataio.DataLoader, or give the loader its PIL "
                              "steps only", "transform")
        if not isinstance(out, torch.Tensor) or out.dtype != torch.uint8 or out.shape != image.shape:
            got = (f"{out.dtype} {tuple(out.shape)}".replace("torch.", "") if isinstance(out, torch.Tensor)
                   else type(out).__name__)
            raise ConfigError(f"{{0}} returned {got} for {where()}: it must return a uint8 tensor of shape "
                              f"{tuple(image.shape)}; do float work in batch_transform=", "transform")
        if out.data_ptr() == image.data_ptr() and out.stride() == image.stride():
            return  # another view of the slot, written in place
        if out.untyped_storage().data_ptr() == image.untyped_storage().data_ptr():
            out = out.clone()  # a rearranged view of the batch (e.g. transposed): copy it out first
        image.copy_(out)


def naming_the_sample(error: Exception, fn: Callable, where: str) -> Exception:
    """``error`` raised by the user's ``fn`` on the sample ``where`` names: an exception of the same type (an
    ``except ValueError`` around the loop still catches it) whose message names the transform, the sample and
    its shard, then the original text; raise it ``from error``. A type that cannot be rebuilt from one message
    (or prints it otherwise, as KeyError) is returned itself; both carry a note naming the sample."""
    name = getattr(fn, "__name__", type(fn).__name__)
    message = f"transform= {name} raised {type(error).__name__} on {where}: {error}"
    try:
        named = type(error)(message)
    except Exception:  # noqa: BLE001 - an __init__ with other arguments
        named = None
    if named is None or str(named) != message:
        named = error
    if hasattr(named, "add_note"):  # Python 3.11+: the traceback's last line names the sample either way
        named.add_note(f"dataio: raised by transform= on {where}")
    return named


def check_batch_output(out: object) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_transform``'s result as ``(images, labels)``, or a ConfigError naming it."""
    if (not isinstance(out, (tuple, list)) or len(out) != 2
            or not all(isinstance(t, torch.Tensor) for t in out)):
        raise ConfigError(f"{{0}} must return (images, labels) tensors, got {type(out).__name__}",
                          "batch_transform")
    return out[0], out[1]
