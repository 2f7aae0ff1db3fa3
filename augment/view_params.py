"""The photometric recipe of a multi-crop view (DINO, DINOv2, iBOT) and its per-sample draws.

A ``ViewRecipe`` holds the probabilities and ranges of DINOv2's ``DataAugmentationDINO`` per view:
``RandomApply(ColorJitter(b, c, s, h), p=jitter)``, ``RandomGrayscale(grayscale)``,
``GaussianBlur(blur_kernel, blur_sigma)`` with probability ``blur``, ``RandomSolarize(threshold, solarize)``.
``draw_view_params`` draws every random number of a batch at once on the host, from a CPU
``torch.Generator``: one (N, 13) uniform draw, so the result depends only on the generator's state and
``n`` (not on which flags happen to come up), and the device never draws nor syncs. ``dataio.augment.view_ops``
applies them on any device, ``dataio.augment.views_kernel`` on uint8 CPU images in C.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np
import torch

from dataio.formats.errors import ConfigError

JITTER_OPS = ("brightness", "contrast", "saturation", "hue")  # the column of each factor, the code of each op
IDENTITY = (1.0, 1.0, 1.0, 0.0)  # the factor of each op that leaves an image as it is: such ops are skipped
MAX_STRENGTH = 1e3  # a jitter strength: its factors in [max(0, 1 - s), 1 + s], far inside float32 and the kernel's
MIN_SIGMA, MAX_SIGMA = 1e-3, 1e3  # a blur's sigma: below, no blur at all; above, a flat kernel (and no float32 taps)
MAX_KERNEL = 31  # blur taps at most (the C kernel's fixed-size tap array); sigma 2 needs 13
FLAG_BITS = {"jitter": 1, "grayscale": 2, "blur": 4, "solarize": 8}  # the C kernel's per-sample flags byte


@dataclass(frozen=True, kw_only=True)
class ViewRecipe:
    """One view's photometric ops: probabilities in [0, 1], jitter strengths as torchvision's ``ColorJitter``."""

    jitter: float = 0.8  # probability of ColorJitter (its four ops then run in a random order)
    brightness: float = 0.4  # factor uniform in [max(0, 1 - b), 1 + b]
    contrast: float = 0.4
    saturation: float = 0.2
    hue: float = 0.1  # shift uniform in [-h, h], h <= 0.5
    grayscale: float = 0.2  # probability of RandomGrayscale
    blur: float = 1.0  # probability of GaussianBlur
    blur_sigma: tuple[float, float] = (0.1, 2.0)  # sigma uniform in [min, max]
    blur_kernel: int = 9  # taps, odd
    solarize: float = 0.0  # probability of RandomSolarize
    solarize_threshold: int = 128  # values >= threshold (of 255) are inverted

    def __post_init__(self) -> None:
        for name in ("jitter", "grayscale", "blur", "solarize"):
            value = getattr(self, name)
            if not (_real(value) and 0 <= value <= 1):
                raise ConfigError(f"{{0}} must be a probability in [0, 1], got {value!r:.20}", name)
        for name in ("brightness", "contrast", "saturation"):  # a factor past float32's range (or the kernel's) fails
            value = getattr(self, name)
            if not (_real(value) and 0 <= value <= MAX_STRENGTH):
                raise ConfigError(f"{{0}} must be a number in [0, {MAX_STRENGTH:g}], got {value!r:.20}", name)
        if not (_real(self.hue) and 0 <= self.hue <= 0.5):
            raise ConfigError(f"{{0}} must be a number in [0, 0.5], got {self.hue!r:.20}", "hue")
        if not isinstance(self.blur_sigma, (str, bytes)) and hasattr(self.blur_sigma, "__len__"):
            object.__setattr__(self, "blur_sigma", tuple(self.blur_sigma))  # a list from argparse or OmegaConf
        sigma = self.blur_sigma
        if not (isinstance(sigma, tuple) and len(sigma) == 2 and all(_real(v) and math.isfinite(v) for v in sigma)
                and MIN_SIGMA <= sigma[0] <= sigma[1] <= MAX_SIGMA):
            raise ConfigError(f"{{0}} must be (min, max) with {MIN_SIGMA:g} <= min <= max <= {MAX_SIGMA:g}, got "
                              f"{sigma!r:.40}", "blur_sigma")
        kernel = self.blur_kernel
        if not (_integer(kernel) and kernel % 2 == 1 and 1 <= kernel <= MAX_KERNEL):
            raise ConfigError(f"{{0}} must be an odd int in 1..{MAX_KERNEL}, got {kernel!r:.20}", "blur_kernel")
        threshold = self.solarize_threshold
        if not (_integer(threshold) and 0 <= threshold <= 255):
            raise ConfigError(f"{{0}} must be an int in 0..255, got {threshold!r:.20}", "solarize_threshold")

    # DINOv2's DataAugmentationDINO, as its recipe reads. Its GaussianBlur(p) passes 1 - p to RandomApply, so the
    # released DINOv2/DINOv3 checkpoints were trained with blur probabilities 0.0, 0.9 and 0.5
    # (facebookresearch/dinov2#411, dinov3#286): ``released=True`` gives those.
    @classmethod
    def dino_global_1(cls, *, released: bool = False) -> ViewRecipe:
        """The first global crop: jitter, grayscale, blur always."""
        return cls(blur=0.0 if released else 1.0)

    @classmethod
    def dino_global_2(cls, *, released: bool = False) -> ViewRecipe:
        """The second global crop: jitter, grayscale, blur at 0.1, solarize at 0.2."""
        return cls(blur=0.9 if released else 0.1, solarize=0.2)

    @classmethod
    def dino_local(cls, *, released: bool = False) -> ViewRecipe:
        """Each local crop: jitter, grayscale, blur at 0.5 (the same either way)."""
        del released
        return cls(blur=0.5)


def _real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, kw_only=True, eq=False)
class ViewParams:
    """Per-sample draws of a batch of N views, CPU tensors; sample ``i``'s ColorJitter runs op ``order[i, k]``
    (an index into ``JITTER_OPS``) k-th, with ``factors[i, op]``, when ``jitter[i]``; then grayscale, blur with
    ``sigma[i]``, solarize, each when its flag is on."""

    jitter: torch.Tensor  # (N,) bool
    order: torch.Tensor  # (N, 4) int64, each row a permutation of 0..3
    factors: torch.Tensor  # (N, 4) float32: brightness, contrast, saturation factors, hue shift
    grayscale: torch.Tensor  # (N,) bool
    blur: torch.Tensor  # (N,) bool
    sigma: torch.Tensor  # (N,) float32 > 0
    solarize: torch.Tensor  # (N,) bool
    blur_kernel: int = 9
    solarize_threshold: int = 128

    def __post_init__(self) -> None:
        n = len(self.jitter) if isinstance(self.jitter, torch.Tensor) and self.jitter.dim() == 1 else -1
        shapes = {"jitter": (n,), "order": (n, 4), "factors": (n, 4), "grayscale": (n,), "blur": (n,),
                  "sigma": (n,), "solarize": (n,)}
        dtypes = {"order": torch.int64, "factors": torch.float32, "sigma": torch.float32}
        for name, shape in shapes.items():
            value, dtype = getattr(self, name), dtypes.get(name, torch.bool)
            if not (isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dtype == dtype
                    and tuple(value.shape) == shape):
                got = f"{value.dtype} {tuple(value.shape)} on {value.device}" if isinstance(value, torch.Tensor) \
                    else type(value).__name__
                raise ValueError(f"ViewParams.{name} must be a CPU {dtype} tensor of shape {shape}, got {got}")
        if not bool((self.order.sort(dim=1).values == torch.arange(4)).all()):
            raise ValueError("ViewParams.order: each row must be a permutation of 0..3")
        f = self.factors
        if not (bool(torch.isfinite(f).all()) and bool((f[:, :3] >= 0).all()) and bool((f[:, 3].abs() <= 0.5).all())):
            raise ValueError("ViewParams.factors: brightness, contrast, saturation must be finite and >= 0, "
                             "hue in [-0.5, 0.5]")
        if not bool(((self.sigma > 0) & torch.isfinite(self.sigma)).all()):
            raise ValueError("ViewParams.sigma must be finite and > 0")
        ViewRecipe(blur_kernel=self.blur_kernel, solarize_threshold=self.solarize_threshold)  # their checks

    def __len__(self) -> int:
        return len(self.jitter)

    def __getitem__(self, index: slice) -> ViewParams:
        """The draws of samples ``index`` (a slice)."""
        return ViewParams(**{f.name: getattr(self, f.name)[index] for f in fields(self) if f.name in _PER_SAMPLE},
                          blur_kernel=self.blur_kernel, solarize_threshold=self.solarize_threshold)

    def rows(self, start: int, stop: int) -> ViewParams:
        """``self[start:stop]`` without checking again what this batch's checks covered (a CPU loop per sample)."""
        part = object.__new__(ViewParams)
        for name in _PER_SAMPLE:
            object.__setattr__(part, name, getattr(self, name)[start:stop])
        object.__setattr__(part, "blur_kernel", self.blur_kernel)
        object.__setattr__(part, "solarize_threshold", self.solarize_threshold)
        return part

    @classmethod
    def cat(cls, parts: list[ViewParams]) -> ViewParams:
        """The draws of several recipes as one batch (DINO's two global views, say); same kernel and threshold."""
        if not parts or len({(p.blur_kernel, p.solarize_threshold) for p in parts}) != 1:
            raise ValueError("ViewParams.cat: one or more parts, all with the same blur_kernel and solarize_threshold")
        return cls(**{name: torch.cat([getattr(p, name) for p in parts]) for name in _PER_SAMPLE},
                   blur_kernel=parts[0].blur_kernel, solarize_threshold=parts[0].solarize_threshold)

    @cached_property
    def host_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(plan, values)``: uint8 (N, 5) flag bits then the order, float32 (N, 5) the four factors then
        sigma. The C kernel's arguments, packed once per batch (decode threads slice them per image)."""
        flags = sum(getattr(self, name).to(torch.uint8) * bit for name, bit in FLAG_BITS.items())
        plan = torch.cat([flags[:, None], self.order.to(torch.uint8)], dim=1).numpy()
        values = torch.cat([self.factors, self.sigma[:, None]], dim=1).numpy()
        return np.ascontiguousarray(plan), np.ascontiguousarray(values)


_PER_SAMPLE = ("jitter", "order", "factors", "grayscale", "blur", "sigma", "solarize")


def draw_view_params(recipe: ViewRecipe, n: int, generator: torch.Generator) -> ViewParams:
    """Every per-sample draw of ``n`` views of ``recipe``, from ``generator`` (a CPU ``torch.Generator``).

    One (n, 13) float64 uniform draw: flags by ``u < p`` (so p = 1 is always, p = 0 never), each sample's op order
    by ranking four uniforms (a uniform permutation, as ``torch.randperm(4)``), factors and sigma by scaling."""
    if not isinstance(recipe, ViewRecipe):
        raise ValueError(f"recipe must be a ViewRecipe, got {type(recipe).__name__}")
    if not (_integer(n) and n >= 0):
        raise ValueError(f"n must be an int >= 0, got {n!r:.20}")
    if not (isinstance(generator, torch.Generator) and generator.device.type == "cpu"):
        raise ValueError("generator must be a CPU torch.Generator (draws stay on the host)")
    u = torch.rand((n, 13), generator=generator, dtype=torch.float64)
    r = recipe
    low = torch.tensor([max(0.0, 1 - r.brightness), max(0.0, 1 - r.contrast), max(0.0, 1 - r.saturation), -r.hue],
                       dtype=torch.float64)
    high = torch.tensor([1 + r.brightness, 1 + r.contrast, 1 + r.saturation, r.hue], dtype=torch.float64)
    lo, hi = r.blur_sigma
    return ViewParams(jitter=u[:, 0] < r.jitter, grayscale=u[:, 1] < r.grayscale, blur=u[:, 2] < r.blur,
                      solarize=u[:, 3] < r.solarize, order=u[:, 4:8].argsort(dim=1),
                      factors=(low + (high - low) * u[:, 8:12]).to(torch.float32),
                      sigma=(lo + (hi - lo) * u[:, 12]).to(torch.float32),
                      blur_kernel=r.blur_kernel, solarize_threshold=r.solarize_threshold)
