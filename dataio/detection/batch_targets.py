"""A batch's targets on the host, between the decode and the device: ragged rows that drop with their samples.

Boxes are ``augment.box_targets.BoxTargets`` (each box's visible polygon in the
output's pixels, so later warps clip and measure it exactly), with the crowd
flag and the mask of each row beside them (``masks[j]`` is row ``j``'s), and
each sample's COCO image id, and each row's keypoints where the folder has them. A batch holds them as its ``targets`` field: a
ragged field (``pipeline.host_batch.Rows``), whose ``keep`` drops a failed
sample's rows when the error policy drops the sample from the other fields.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dataio.augment.box_targets import BoxTargets


@dataclass
class BatchTargets:
    """Boxes (ragged by sample), crowd flags and masks (T, S, S) uint8 or None by row, image ids by sample."""

    boxes: BoxTargets
    iscrowd: np.ndarray
    masks: np.ndarray | None
    image_id: np.ndarray
    keypoints: np.ndarray | None = None  # (T, K, 3) by row, in the output's pixels (``augment.keypoint_targets``)

    def __len__(self) -> int:
        """Samples (not boxes): a per-sample field's count."""
        return len(self.image_id)

    def keep(self, keep: np.ndarray) -> BatchTargets:
        """Only the samples where ``keep`` (N,) bool is true, with their rows."""
        rows = keep[self.boxes.owners()]
        counts = np.diff(self.boxes.offsets)[keep]
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        b = self.boxes
        boxes = BoxTargets(b.polygons[rows], b.full_areas[rows], b.labels[rows], offsets)
        return BatchTargets(boxes, self.iscrowd[rows], None if self.masks is None else self.masks[rows],
                            self.image_id[keep], None if self.keypoints is None else self.keypoints[rows])
