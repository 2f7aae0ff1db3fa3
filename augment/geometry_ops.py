"""Batched geometric ops with one affine matrix per sample, PIL conventions.

RandAugment's Rotate, ShearX/Y and TranslateX/Y are each an affine map; a
batch mixing them is warped in one ``kornia.geometry.warp_affine`` call with a
(N, 2, 3) matrix stack. The matrices reproduce PIL's ``Image.rotate`` (about
the centre, counter-clockwise for positive angles) and ``Image.transform(AFFINE)``
as timm applies them (shear about the top-left corner, translate in pixels).
Matrices are built on the host from host-drawn parameters. The warp is one
``grid_sample``; random resized crop uses kornia's ``crop_and_resize``.
"""

from __future__ import annotations


import torch
import torch.nn.functional as F
from kornia.geometry.transform import crop_and_resize

ROTATE, SHEAR_X, SHEAR_Y, TRANSLATE_X, TRANSLATE_Y = range(5)


def pil_inverse_maps(kind: torch.Tensor, amount: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(N, 3, 3) float64 output-to-input maps in PIL's continuous pixel coordinates.

    ``kind[i]`` is one of ROTATE (``amount`` in degrees), SHEAR_X/Y (shear
    factor) or TRANSLATE_X/Y (pixels); all on the host.
    """
    n = len(kind)
    maps = torch.eye(3, dtype=torch.float64).repeat(n, 1, 1)
    amount = amount.to(torch.float64)
    theta = -torch.deg2rad(amount)  # PIL: angle = -radians(angle), then the 2x2 [cos, sin; -sin, cos]
    cos, sin = torch.cos(theta), torch.sin(theta)
    cx, cy = width / 2.0, height / 2.0
    rot = kind == ROTATE
    maps[rot, 0, 0], maps[rot, 0, 1] = cos[rot], sin[rot]
    maps[rot, 1, 0], maps[rot, 1, 1] = -sin[rot], cos[rot]
    maps[rot, 0, 2] = cos[rot] * -cx + sin[rot] * -cy + cx
    maps[rot, 1, 2] = -sin[rot] * -cx + cos[rot] * -cy + cy
    maps[kind == SHEAR_X, 0, 1] = amount[kind == SHEAR_X]
    maps[kind == SHEAR_Y, 1, 0] = amount[kind == SHEAR_Y]
    maps[kind == TRANSLATE_X, 0, 2] = amount[kind == TRANSLATE_X]
    maps[kind == TRANSLATE_Y, 1, 2] = amount[kind == TRANSLATE_Y]
    return maps


def forward_matrices(inverse_maps: torch.Tensor) -> torch.Tensor:
    """(N, 2, 3) source-to-destination matrices in kornia's pixel-centre coordinates.

    PIL samples output pixel ``x`` at input ``A (x + 0.5) - 0.5``; kornia wants
    the forward map, so the half-pixel shift is folded in and the map inverted.
    """
    shift = torch.eye(3, dtype=torch.float64)
    shift[:2, 2] = 0.5
    unshift = torch.eye(3, dtype=torch.float64)
    unshift[:2, 2] = -0.5
    inverse_centres = unshift @ inverse_maps @ shift
    return torch.linalg.inv(inverse_centres)[:, :2, :].to(torch.float32)


def warp(x: torch.Tensor, forward: torch.Tensor, fill: float | torch.Tensor, mode: str = "bilinear") -> torch.Tensor:
    """Warp each sample by its matrix; uncovered pixels take ``fill`` (0-255; a (1, 3, 1, 1) tensor: per channel)."""
    # Sampling ``x - fill`` with zero padding and adding ``fill`` back gives the fill
    # with one grid_sample; kornia's "fill" mode samples a second, mask image.
    height, width = x.shape[-2:]
    theta = normalized_inverse(forward, height, width).to(x.device, x.dtype, non_blocking=True)
    grid = affine_grid(theta, height, width)
    return F.grid_sample(x - fill, grid, mode=mode, padding_mode="zeros", align_corners=False).add_(fill)


def affine_grid(theta: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """``F.affine_grid(theta, ..., align_corners=False)`` as broadcast multiply-adds (bmm with K=3 is slow on CPU)."""
    xs = torch.linspace(-1 + 1 / width, 1 - 1 / width, width, device=theta.device, dtype=theta.dtype).view(1, 1, width)
    ys = torch.linspace(-1 + 1 / height, 1 - 1 / height, height, device=theta.device, dtype=theta.dtype).view(1, height, 1)
    t = theta.view(-1, 6, 1, 1)
    grid = torch.empty(theta.shape[0], height, width, 2, device=theta.device, dtype=theta.dtype)
    torch.add(t[:, 0] * xs, t[:, 1] * ys + t[:, 2], out=grid[..., 0])
    torch.add(t[:, 3] * xs, t[:, 4] * ys + t[:, 5], out=grid[..., 1])
    return grid


def normalized_inverse(forward: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(N, 2, 3) output-to-input maps in ``affine_grid``'s [-1, 1] coordinates (align_corners=False)."""
    to_norm = torch.tensor([[2 / width, 0, 1 / width - 1], [0, 2 / height, 1 / height - 1], [0, 0, 1]],
                           dtype=torch.float64)
    forward3 = torch.cat([forward.to(torch.float64), torch.tensor([[[0, 0, 1.0]]]).expand(len(forward), 1, 3)], 1)
    inverse = to_norm @ torch.linalg.inv(forward3) @ torch.linalg.inv(to_norm)
    return inverse[:, :2, :].to(torch.float32)


def crop_resize_flip(x: torch.Tensor, boxes: torch.Tensor, flipped: torch.Tensor, size: int) -> torch.Tensor:
    """Crop ``boxes`` (N, 4 as x0, y0, x1, y1 pixels, exclusive end) to ``size``², mirroring flipped rows.

    The flip is free: a mirrored box (right edge first) makes kornia's
    ``crop_and_resize`` sample right to left. Bilinear, without antialiasing.
    """
    x0, y0 = boxes[:, 0], boxes[:, 1]
    x1, y1 = boxes[:, 2] - 1, boxes[:, 3] - 1  # inclusive corners
    left = torch.where(flipped, x1, x0)
    right = torch.where(flipped, x0, x1)
    corners = torch.stack([torch.stack([left, y0], -1), torch.stack([right, y0], -1),
                           torch.stack([right, y1], -1), torch.stack([left, y1], -1)], dim=1)
    return crop_and_resize(x, corners.to(x.device, x.dtype, non_blocking=True), (size, size), align_corners=True)


def rotation_degrees(magnitude: torch.Tensor, max_degrees: float = 30.0) -> torch.Tensor:
    """RandAugment's Rotate angle for magnitudes on the 0-10 scale."""
    return magnitude / 10 * max_degrees


def shear_factor(magnitude: torch.Tensor, max_shear: float = 0.3) -> torch.Tensor:
    """RandAugment's shear factor (``tan`` of the shear angle) for 0-10 magnitudes."""
    return magnitude / 10 * max_shear


def translate_pixels(magnitude: torch.Tensor, extent: int, max_fraction: float = 0.45) -> torch.Tensor:
    """RandAugment's translation in pixels (timm's ``translate_pct``) for 0-10 magnitudes."""
    return magnitude / 10 * max_fraction * extent

