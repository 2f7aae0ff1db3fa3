"""``DetectionConfig(max_boxes=K)`` checked on the host, in the read task, where a failure is a sample the error
policy can drop: the device stage pads to K and cannot drop one (its batch is already fixed).

The count is the device finish's (``detection_finish``): the boxes through the
host's crop, resize and flip (and ``crop_on_device``'s crop, already in their
maps), then the ``min_visible``/``min_side`` and crowd filters. With RandAugment
(``warped``) its warps come after: they only clip a box (its visible fraction
never grows: the ops are area-preserving, the clipped part only shrinks) but a
rotation can widen a thin box's envelope, so only ``min_visible`` and the crowd
filter are counted. Either way the count bounds the device stage's: a sample
that passes here never exceeds K there.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dataio.augment.box_targets import BoxTargets
from dataio.formats.errors import SampleError
from dataio.detection.detection_config import DetectionConfig
from dataio.pipeline.sample_source import Failures


def over_max_boxes(boxes: BoxTargets, iscrowd: np.ndarray, detection: DetectionConfig, keys: np.ndarray,
                   sample_error: Callable[[int, str], SampleError], *, warped: bool = False) -> Failures:
    """The batch positions whose samples keep more than ``detection.max_boxes`` boxes, each with its error
    ([] without a limit); ``warped``: RandAugment follows (module docstring)."""
    limit = detection.max_boxes
    if limit is None or boxes.num_samples == 0:
        return []
    if warped:
        rows = np.flatnonzero(boxes.visible_fractions() >= detection.min_visible)
    else:
        rows = boxes.kept(detection.min_visible, detection.min_side)[1]
    if not detection.crowd:
        rows = rows[~iscrowd[rows]]
    counts = np.bincount(boxes.owners()[rows], minlength=boxes.num_samples)
    return [(int(i), sample_error(int(keys[i]), f"{int(counts[i])} boxes after its crop and filters, more than "
                                  f"max_boxes={limit}"))
            for i in np.flatnonzero(counts > limit)]
