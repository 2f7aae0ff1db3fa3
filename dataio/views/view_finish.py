"""A batch of multi-crop views on the device, as DINO's and DINOv2's training loops take it.

Views the decode threads already coloured and normalised (the CPU device: ``view_batches``) are laid out as they
are, without a copy. Otherwise (a GPU, or DALI) the uint8 views are copied and their photometric draws applied
there, batched, one call per view size (``augment.view_ops.apply_views``, or on the CPU the C kernel over the batch:
``augment.views_kernel.apply_views_cpu``), normalised in the same pass. The dict:

- ``collated_global_crops`` ``(G * N, 3, S, S)`` and ``collated_local_crops`` ``(L * N, 3, s, s)``, view-major as
  DINOv2's collate stacks them (``dataio.views.views_config``);
- ``views``: the list of the ``G + L`` views, each ``(N, 3, S, S)``, globals first (DINO's ``images``; slices of
  the two tensors above);
- ``label`` (when the folder has classes), ``sample_ids`` and ``repeated`` ``(N,)``;
- with ``ViewsConfig.masks``, iBOT's masks of the global crops (``augment.ibot_masks``): ``collated_masks``
  ``(G * N, tokens)`` bool, ``mask_indices_list``, ``masks_weight``, ``upperbound`` (an int) and
  ``n_masked_patches`` ``(1,)``, as DINOv2's collate gives them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from dataio.augment.ibot_masks import ibot_masks
from dataio.augment.seeding import derive_seed
from dataio.augment.view_ops import apply_views
from dataio.augment.views_kernel import apply_views_cpu
from dataio.images.config import ImageLoaderConfig
from dataio.formats.errors import ConfigError
from dataio.pipeline.hook_sizes import check_rows, checked_dict
from dataio.pipeline.host_batch import HostBatch
from dataio.views.view_batches import GLOBAL, LOCAL
from dataio.views.view_stack import ViewStack

MASKS_STREAM = 6  # augment.seeding streams: ..., 5 the views' draws, 6 iBOT's masks
# fields of views * N rows (or a list), or of the batch as a whole: not the batch's N
STACKED = frozenset({GLOBAL, LOCAL, "views", "collated_masks", "mask_indices_list", "masks_weight", "upperbound",
                     "n_masked_patches"})


class ViewFinish:
    """``finish(moved, host)``: the views' dict (module docstring)."""

    stage = "augment"

    def __init__(self, config: ImageLoaderConfig, options: Any, source: Any) -> None:
        c = config
        self.device = torch.device(c.device)
        self.normalization = {"mean": c.mean, "std": c.std} if c.normalize else {}
        self.memory_format = torch.channels_last if c.channels_last else torch.contiguous_format
        self.planar = c.normalize and not c.channels_last  # how the decode threads lay out what they normalise
        self.views = options

    def fields(self, host: HostBatch) -> dict[str, Any]:
        kept = {name: value for name, value in host.fields.items() if name not in (GLOBAL, LOCAL)}
        return {**kept, "sample_ids": host.samples, "repeated": host.repeated}

    def __call__(self, moved: dict[str, Any], host: HostBatch) -> dict[str, Any]:
        n = len(host)
        out: dict[str, Any] = {}
        views: list[torch.Tensor] = []
        for name in (GLOBAL, LOCAL):
            stack = host.fields.get(name)
            if stack is None:
                continue
            out[name] = images = self._finished(stack)
            views += list(images.split(n))
        if self.views.masks is not None:  # after the error policy's drops: the batch's own global crops
            rng = np.random.default_rng(derive_seed(host.key, MASKS_STREAM))
            masks = ibot_masks(self.views.masks, self.views.global_crops * n, self.views.global_size, rng)
            out.update({name: torch.from_numpy(value).to(self.device) if isinstance(value, np.ndarray) else value
                        for name, value in masks.items()})
        return {**out, "views": views, **moved}

    def _finished(self, stack: ViewStack) -> torch.Tensor:
        """One stack's views as ``(views * N, 3, S, S)`` on the device, coloured, normalised, laid out."""
        array = torch.from_numpy(stack.array) if isinstance(stack.array, np.ndarray) else stack.array
        if stack.applied:  # the decode threads' output: NHWC (channels_last) or planes, already in place
            images = array if self.planar else array.permute(0, 3, 1, 2)
            return images.contiguous(memory_format=self.memory_format)
        images = array.to(self.device, non_blocking=True).permute(0, 3, 1, 2)
        colour = apply_views_cpu if images.device.type == "cpu" else apply_views
        images = colour(images, stack.params, **self.normalization)
        return images.contiguous(memory_format=self.memory_format)

    def checked(self, out: Any, rows: int, given: Any = None) -> dict:
        """``batch_transform(dict)``'s result: the view fields keep ``views * N`` rows (view-major: a row short
        moves every view of the samples after it), ``views`` its ``G + L`` views of ``N``, the others ``N``."""
        out = checked_dict(out, rows, per_object=STACKED, given=given)
        v = self.views
        expected = {GLOBAL: v.global_crops * rows, LOCAL: v.local_crops * rows, "collated_masks": v.global_crops * rows}
        views = out.get("views")
        if isinstance(views, (list, tuple)):
            if len(views) != v.views:
                raise ConfigError(f"{{0}} returned {len(views)} views for {v.views}: every view of the batch, in "
                                  "order", "batch_transform")
            check_rows("batch_transform", {f"views[{i}]": view for i, view in enumerate(views)}, rows, "samples")
        for name, count in expected.items():
            value = out.get(name)
            if name in (given or {}) and hasattr(value, "shape"):
                check_rows("batch_transform", {name: value}, count, f"views of {rows} samples")
        return out
