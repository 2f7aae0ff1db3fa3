"""Per-object binary masks that follow their images' crops, resizes, flips and affine warps.

Masks are resampled with nearest-neighbour at each output pixel's centre: output
pixel ``(i, j)`` takes the input pixel under the point ``inverse @ (j + 0.5, i + 0.5)``
(floored), or 0 where that point is outside the input. That is the frame the
image stages sample in (``target_maps``), so a mask pixel is set where the
image pixel's centre came from the object, and a mask stays binary.

Two steps, as the images take them: ``crop_masks`` on the host, per sample
(the source images differ in size; the crop's map is axis-aligned, so it is two
index gathers, never a full-size warp), and ``warp_masks`` for RandAugment's
slots, batched, in torch (on the images' device). The slots are composed into
one sampling, checking at every slot that the point was inside that slot's
image, so pixels the image filled (pushed out, then brought back) stay off:
one rounding instead of one per slot.

COCO segmentations (polygons, or RLE, compressed or not) are decoded by
pycocotools (the ``coco`` extra), the reference implementation of COCO's RLE,
rather than by a codec of our own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from dataio.augment.target_maps import crop_resize_maps

WITHOUT_PYCOCOTOOLS = ("COCO segmentations need pycocotools, which is not installed: "
                       "pip install 'torch-dataio[coco]' (or pycocotools)")


def masks_from_coco(segmentations: Sequence[object], height: int, width: int) -> np.ndarray:
    """(K, H, W) uint8 masks of COCO ``segmentation`` fields: polygon lists or RLE dicts.

    Raises ImportError (one line) without pycocotools, ValueError for a segmentation of
    another form."""
    try:
        from pycocotools import mask as coco_mask  # lazy: optional, only COCO segmentations need it
    except ImportError:
        raise ImportError(WITHOUT_PYCOCOTOOLS) from None
    out = np.zeros((len(segmentations), height, width), np.uint8)
    for k, segmentation in enumerate(segmentations):
        if isinstance(segmentation, list):  # polygons: [[x0, y0, x1, y1, ...], ...]
            rle = coco_mask.merge(coco_mask.frPyObjects(segmentation, height, width)) if segmentation else None
        elif isinstance(segmentation, dict) and "counts" in segmentation and "size" in segmentation:
            if list(segmentation["size"]) != [height, width]:
                raise ValueError(f"segmentation {k} is {segmentation['size']}, the image {[height, width]}")
            counts = segmentation["counts"]
            rle = coco_mask.frPyObjects(segmentation, height, width) if isinstance(counts, list) else segmentation
        else:
            raise ValueError(f"segmentation {k} is neither a polygon list nor an RLE dict")
        if rle is not None:
            out[k] = coco_mask.decode(rle)
    return out


def crop_masks(masks: np.ndarray, box: np.ndarray, flipped: bool, out_width: int, out_height: int) -> np.ndarray:
    """One sample's (K, H, W) masks through its crop box and flip: (K, out_height, out_width) uint8.

    ``box`` and ``flipped`` are the ones its image was decoded with (``crop_resize_maps``).
    """
    forward = crop_resize_maps(np.asarray(box)[None], np.array([flipped]), out_width, out_height)[0]
    return resample_masks(masks, forward, out_width, out_height)


def resample_masks(masks: np.ndarray, forward: np.ndarray, out_width: int, out_height: int) -> np.ndarray:
    """(K, H, W) masks through one axis-aligned (3, 3) forward map (a crop, resize and flip, or a chain of
    them: the decode's, then the device crop's): (K, out_height, out_width) uint8, two index gathers.

    Raises ValueError for a map that rotates or shears (``warp_masks`` takes those)."""
    masks = np.asarray(masks)
    inverse = np.linalg.inv(np.asarray(forward, np.float64))
    if abs(inverse[0, 1]) > 1e-12 or abs(inverse[1, 0]) > 1e-12:
        raise ValueError("resample_masks takes axis-aligned maps; warp_masks takes rotations and shears")
    columns = _source_indices(inverse[0, 0] * (np.arange(out_width) + 0.5) + inverse[0, 2], masks.shape[2])
    rows = _source_indices(inverse[1, 1] * (np.arange(out_height) + 0.5) + inverse[1, 2], masks.shape[1])
    out = masks[:, np.maximum(rows, 0)][:, :, np.maximum(columns, 0)]
    out[:, rows < 0] = 0
    out[:, :, columns < 0] = 0
    return out.astype(np.uint8, copy=False)


def _source_indices(points: np.ndarray, extent: int) -> np.ndarray:
    """The pixel under each continuous coordinate, or -1 outside ``[0, extent)``."""
    index = np.floor(points).astype(np.int64)
    return np.where((points >= 0) & (index < extent), index, -1)


def warp_masks(masks: torch.Tensor, offsets: np.ndarray, slot_maps: np.ndarray, chunk: int = 16) -> torch.Tensor:
    """(T, H, W) masks through their samples' chains of same-size affine maps, nearest-neighbour.

    Sample ``i`` owns masks ``offsets[i]:offsets[i + 1]`` (``BoxTargets.offsets``), and ``slot_maps``
    (N, K, 3, 3) holds each sample's forward maps in order (``target_maps.randaugment_maps``). The
    source pixel of every output pixel is found once per sample, ``chunk`` samples at a time (float64
    points: 16 bytes per pixel), and each of its masks gathers through it. Runs on the masks' device.
    """
    out = torch.empty_like(masks)
    count, height, width = masks.shape
    offsets = np.asarray(offsets, np.int64)
    if len(offsets) != len(slot_maps) + 1 or offsets[0] != 0 or offsets[-1] != count or (np.diff(offsets) < 0).any():
        raise ValueError(f"offsets {offsets.tolist()[:8]}... do not split {count} masks among {len(slot_maps)} samples")
    if len(slot_maps) == 0 or count == 0:
        return out
    inverses = torch.from_numpy(np.linalg.inv(np.asarray(slot_maps, np.float64)))
    flat = masks.reshape(count, height * width)
    for first in range(0, len(inverses), chunk):
        sources = source_pixels(inverses[first:first + chunk].to(masks.device), height, width)
        for i, source in enumerate(sources, start=first):
            rows = slice(int(offsets[i]), int(offsets[i + 1]))
            if rows.stop > rows.start:
                picked = flat[rows].index_select(1, source.clamp(min=0))
                out[rows] = (picked * (source >= 0).to(masks.dtype)).reshape(-1, height, width)
    return out


def source_pixels(inverses: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(n, H * W) int64: the flat input pixel each output pixel centre comes from through (n, K, 3, 3)
    output-to-input maps applied last slot first, or -1 where it left the image at any slot."""
    n = len(inverses)
    ys, xs = torch.meshgrid(torch.arange(height, device=inverses.device, dtype=torch.float64) + 0.5,
                            torch.arange(width, device=inverses.device, dtype=torch.float64) + 0.5, indexing="ij")
    x, y = xs.reshape(1, -1).expand(n, -1), ys.reshape(1, -1).expand(n, -1)
    inside = torch.ones((n, height * width), dtype=torch.bool, device=inverses.device)
    for slot in reversed(range(inverses.shape[1])):  # the last slot's output back to the first slot's input
        a = inverses[:, slot].reshape(n, 9, 1)
        x, y = a[:, 0] * x + a[:, 1] * y + a[:, 2], a[:, 3] * x + a[:, 4] * y + a[:, 5]
        inside &= (x >= 0) & (x < width) & (y >= 0) & (y < height)
    index = y.floor().clamp_(0, height - 1).long() * width + x.floor().clamp_(0, width - 1).long()
    return torch.where(inside, index, -1)


def boxes_from_masks(masks: torch.Tensor | np.ndarray) -> np.ndarray:
    """(T, 4) float32 tight xyxy bounds of each mask's pixels (all zeros for an empty mask).

    With masks at hand these are tighter boxes than the warped box targets for shapes that
    do not fill their box (an ellipse under a rotation)."""
    masks = torch.as_tensor(masks).bool()
    rows, columns = masks.any(dim=2), masks.any(dim=1)  # (T, H), (T, W)
    out = np.zeros((len(masks), 4), np.float32)
    if len(masks) == 0:
        return out
    present = rows.any(dim=1).cpu().numpy()
    first_col = columns.float().argmax(dim=1).cpu().numpy()
    last_col = masks.shape[2] - columns.flip(1).float().argmax(dim=1).cpu().numpy()
    first_row = rows.float().argmax(dim=1).cpu().numpy()
    last_row = masks.shape[1] - rows.flip(1).float().argmax(dim=1).cpu().numpy()
    out[present] = np.stack([first_col, first_row, last_col, last_row], axis=1)[present]
    return out
