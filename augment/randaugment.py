"""RandAugment (Cubuk et al. 2019) on a batch, with ops and magnitudes drawn per sample.

Each sample draws its own ``num_ops`` ops from the 14-op set of timm and
torchvision and its own magnitudes (optionally with Gaussian noise, timm's
``magnitude_std``). To avoid a per-image loop, each op slot sorts the batch by
the chosen op, so every op runs once on a contiguous slice with a tensor of
per-sample parameters; the five geometric ops share one warp. Choices are
drawn on the host, so the sort costs no device synchronisation. uint8 batches
on the CPU take the C kernel instead (``dataio.augment.cpu_kernel``): the same draws,
applied image by image in cache with PIL's uint8 rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from dataio.augment import color_ops as color
from dataio.augment import cpu_kernel
from dataio.augment import geometry_ops as geometry
from dataio.augment.seeding import RandomStage
from dataio.formats.fallback_log import warn_once

OPS = ("Identity", "AutoContrast", "Equalize", "Solarize", "Color", "Posterize", "Contrast", "Brightness",
       "Sharpness", "Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY")
GEOMETRIC = OPS[9:]  # contiguous at the end: one warp for all of them
MAX_MAGNITUDE = 10.0


@dataclass(frozen=True, kw_only=True)
class RandAugmentConfig:
    """RandAugment(``num_ops``, ``magnitude``) on the 0-10 scale; ``ops`` restricts the set."""

    num_ops: int = 2
    magnitude: float = 9.0
    magnitude_std: float = 0.0  # per application noise, as timm's "mstd"
    ops: tuple[str, ...] = OPS
    fill: float = 128.0  # value of pixels uncovered by geometric ops (timm's gray)
    interpolation: Literal["bilinear", "nearest"] = "bilinear"
    output: Literal["uint8", "float"] = "uint8"  # float: [0, 255], no rounding
    cpu_kernel: bool = True  # uint8 CPU batches go through the C kernel (PIL rounding) when it is built

    def __post_init__(self) -> None:
        if self.num_ops < 0:
            raise ValueError(f"num_ops must be >= 0, got {self.num_ops}")
        if not 0 <= self.magnitude <= MAX_MAGNITUDE:
            raise ValueError(f"magnitude must be in [0, {MAX_MAGNITUDE}], got {self.magnitude}")
        if not 0 <= self.fill <= 255:
            raise ValueError(f"fill must be in [0, 255], got {self.fill}")
        if self.magnitude_std < 0:
            raise ValueError("magnitude_std must be >= 0")
        unknown = sorted(set(self.ops) - set(OPS))
        if unknown or not self.ops:
            raise ValueError(f"unknown RandAugment ops {unknown}; choose from {OPS}")
        if self.interpolation not in ("bilinear", "nearest") or self.output not in ("uint8", "float"):
            raise ValueError("interpolation is bilinear|nearest, output is uint8|float")


def _factor(magnitude: torch.Tensor, sign: torch.Tensor) -> torch.Tensor:
    """Enhance factor ``1 +- 0.9 * m / 10`` (timm, torchvision)."""
    return 1 + sign * magnitude / MAX_MAGNITUDE * 0.9


def photometric_parameter(name: str, magnitude: torch.Tensor, sign: torch.Tensor) -> torch.Tensor:
    """The op's per-sample parameter: solarize threshold, posterize bits or enhance factor (0 if none)."""
    if name == "Solarize":
        return 256 - magnitude / MAX_MAGNITUDE * 256
    if name == "Posterize":
        return 8 - torch.round(magnitude / MAX_MAGNITUDE * 4)
    if name in ("Color", "Contrast", "Brightness", "Sharpness"):
        return _factor(magnitude, sign)
    return torch.zeros_like(magnitude)


def photometric(name: str, x: torch.Tensor, magnitude: torch.Tensor, sign: torch.Tensor) -> torch.Tensor:
    """Apply photometric op ``name`` to a float [0, 255] slice with per-sample host parameters.

    Returns the result, which may be ``x`` itself, overwritten."""
    parameter = photometric_parameter(name, magnitude, sign).to(x.device, x.dtype, non_blocking=True)
    if name == "AutoContrast":
        return color.autocontrast_(x)
    if name == "Equalize":
        return color.equalize(x)
    ops = {"Solarize": color.solarize, "Posterize": color.posterize_, "Color": color.color_,
           "Contrast": color.contrast_, "Brightness": color.brightness_, "Sharpness": color.sharpness_}
    return ops[name](x, parameter)


def kernel_plan(ops: torch.Tensor, magnitude: torch.Tensor, sign: torch.Tensor, height: int,
                width: int) -> tuple[np.ndarray, np.ndarray]:
    """The C kernel's inputs for (N, K) host draws: int32 codes and (N, K, 6) float64 parameters.

    Codes 0-8 are ``OPS[0:9]``; every geometric op is code 9 with PIL's six
    AFFINE coefficients; a photometric op's parameter is in column 0.
    """
    first_geometric = len(OPS) - len(GEOMETRIC)
    codes = ops.clamp(max=first_geometric).to(torch.int32)
    params = torch.zeros(*ops.shape, 6, dtype=torch.float64)
    for index, name in enumerate(OPS[1:first_geometric], start=1):
        picked = ops == index
        params[..., 0][picked] = photometric_parameter(name, magnitude[picked], sign[picked]).double()
    geometric = ops >= first_geometric
    maps = geometric_maps(ops[geometric] - first_geometric, magnitude[geometric], sign[geometric], height, width)
    params[geometric] = maps[:, :2, :].reshape(-1, 6)
    return codes.numpy(), params.numpy()


def geometric_maps(ops: torch.Tensor, magnitude: torch.Tensor, sign: torch.Tensor, height: int, width: int):
    """PIL inverse maps for samples whose op index (into GEOMETRIC) is ``ops``."""
    signed = sign * magnitude
    amount = torch.stack([geometry.rotation_degrees(signed), geometry.shear_factor(signed),
                          geometry.shear_factor(signed), geometry.translate_pixels(signed, width),
                          geometry.translate_pixels(signed, height)], dim=1)
    picked = amount.gather(1, ops.view(-1, 1)).squeeze(1)
    return geometry.pil_inverse_maps(ops, picked, height, width)


class RandAugment(RandomStage):
    """Per-sample RandAugment: ``RandAugment(RandAugmentConfig(...))(uint8 NCHW batch)``."""

    stream = 1

    def __init__(self, config: RandAugmentConfig | None = None) -> None:
        super().__init__()
        self.config = config or RandAugmentConfig()
        self._op_ids = torch.tensor([OPS.index(name) for name in self.config.ops])

    def draw(self, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Host parameters, each (n, num_ops): op index into OPS, magnitude, sign (+-1)."""
        c, g = self.config, self.generator
        picks = torch.randint(len(self._op_ids), (n, c.num_ops), generator=g)
        magnitude = torch.full((n, c.num_ops), float(c.magnitude))
        noise = torch.randn((n, c.num_ops), generator=g)
        if c.magnitude_std > 0:
            magnitude = (magnitude + noise * c.magnitude_std).clamp_(0, MAX_MAGNITUDE)
        sign = torch.where(torch.rand((n, c.num_ops), generator=g) < 0.5, -1.0, 1.0)
        return self._op_ids[picks], magnitude, sign

    def __call__(self, images: torch.Tensor, *, output: Literal["uint8", "float"] | None = None,
                 draws: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Augment ``(N, 3, H, W)`` uint8 (or float 0-255) images; each sample its own ops.

        ``output`` overrides the config's for this call. ``draws``: ``self.draw(N)``'s, made by the
        caller so that box and mask targets follow the same ops (``target_maps.randaugment_maps``);
        by default the call draws them itself."""
        if images.ndim != 4 or images.shape[1] != 3:
            raise ValueError(f"RandAugment expects (N, 3, H, W) images, got {tuple(images.shape)}")
        output = output or self.config.output
        n, _, height, width = images.shape
        ops, magnitude, sign = self.draw(n) if draws is None else draws
        if ops.shape != (n, self.config.num_ops):
            raise ValueError(f"draws are for {tuple(ops.shape)} (samples, ops); the batch needs "
                             f"{(n, self.config.num_ops)}")
        if self.uses_kernel(images.device, images.dtype):
            codes, params = kernel_plan(ops, magnitude, sign, height, width)
            out = cpu_kernel.apply(images, codes, params, fill=int(round(self.config.fill)))
            return out.float() if output == "float" else out
        channels_last = images.is_contiguous(memory_format=torch.channels_last) and not images.is_contiguous()
        x = images
        order = torch.arange(n)  # x[i] holds sample order[i]
        for slot in range(self.config.num_ops):
            perm = torch.argsort(ops[order, slot], stable=True)
            order = order[perm]
            x = x.index_select(0, perm.to(x.device, non_blocking=True)).float()  # float after the first gather
            self._apply_slot(x, ops[order, slot], magnitude[order, slot], sign[order, slot])
        x = x.float() if output == "float" else x.round_().to(torch.uint8) if x.is_floating_point() else x
        x = x.index_select(0, torch.argsort(order).to(x.device, non_blocking=True))
        return x.contiguous(memory_format=torch.channels_last) if channels_last else x

    def uses_kernel(self, device: torch.device, dtype: torch.dtype) -> bool:
        """Whether images of this device and dtype go through the C kernel (uint8 on the CPU, bilinear)."""
        c = self.config
        wanted = c.cpu_kernel and device.type == "cpu" and dtype == torch.uint8 and c.interpolation == "bilinear"
        if wanted and not cpu_kernel.AVAILABLE:
            warn_once("randaugment-kernel", cpu_kernel.WITHOUT_KERNEL)
        return wanted and cpu_kernel.AVAILABLE

    def _apply_slot(self, x: torch.Tensor, ops: torch.Tensor, magnitude: torch.Tensor, sign: torch.Tensor) -> None:
        """Apply each op to its contiguous run of ``x`` (sorted by ``ops``), in place."""
        counts = torch.bincount(ops, minlength=len(OPS)).tolist()  # host tensor: no sync
        starts = [sum(counts[:i]) for i in range(len(OPS) + 1)]
        for index, name in enumerate(OPS[:9]):
            lo, hi = starts[index], starts[index + 1]
            if hi > lo and name != "Identity":
                run = x[lo:hi]
                out = photometric(name, run, magnitude[lo:hi], sign[lo:hi])
                if out is not run:
                    run.copy_(out)
        lo, hi = starts[9], starts[len(OPS)]
        if hi > lo:
            height, width = x.shape[-2:]
            maps = geometric_maps(ops[lo:hi] - 9, magnitude[lo:hi], sign[lo:hi], height, width)
            x[lo:hi] = geometry.warp(x[lo:hi], geometry.forward_matrices(maps), self.config.fill,
                                     self.config.interpolation)
