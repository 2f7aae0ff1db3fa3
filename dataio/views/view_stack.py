"""A batch's views of one size, laid out view-major, as a ragged field that drops a failed sample's views with it.

DINOv2's collate stacks each sample's view 0, then each sample's view 1, ...: rows ``v * N + i`` of one array are
view ``v`` of sample ``i``. The source writes the views there directly (no reordering copy after the decode), so the
array's first dimension is ``views * N``, not the batch's ``N``: a ``host_batch.Rows`` field, whose ``keep`` takes
the rows of the kept samples in every view block, with their photometric draws.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch

from dataio.augment.view_params import ViewParams


@dataclass
class ViewStack:
    """``views`` views of each of the batch's samples, view-major in ``array`` ((views * N, ...), numpy or torch),
    with their photometric draws ``params`` (rows in the same order) and whether the decode threads applied them."""

    array: Any
    views: int
    params: ViewParams
    applied: bool  # the photometric ops (and normalisation) were applied on the host

    def __len__(self) -> int:
        """The batch's samples."""
        return len(self.array) // self.views

    def keep(self, mask: np.ndarray) -> ViewStack:
        """Only the samples where ``mask`` (N,) bool is True, in every view block."""
        n = len(self)
        rows = (np.arange(self.views)[:, None] * n + np.flatnonzero(mask)[None, :]).reshape(-1)
        picked = torch.from_numpy(rows)
        array = self.array[rows] if isinstance(self.array, np.ndarray) else self.array[picked.to(self.array.device)]
        return ViewStack(array, self.views, _rows_of(self.params, picked), self.applied)


def _rows_of(params: ViewParams, rows: torch.Tensor) -> ViewParams:
    """The draws of ``rows`` (an index tensor) of ``params``."""
    per_sample = {f.name: getattr(params, f.name)[rows] for f in fields(params)
                  if isinstance(getattr(params, f.name), torch.Tensor)}
    return ViewParams(**per_sample, blur_kernel=params.blur_kernel, solarize_threshold=params.solarize_threshold)
