"""What ``dataio verify`` checks of a folder with box targets (``convert coco``'s; its ``verify`` part in
``dataio.formats.kinds``): each sample's targets against themselves and the manifest, boxes of no area (packed
before packing refused them: ``coco_fields.thin_boxes``), a keypoints folder's points (3 x K values a box, finite,
visibility 0, 1 or 2; K from the manifest's names), and (``--deep``) each mask's RLE against its image's
size."""

from __future__ import annotations

import numpy as np

from dataio.formats.coco.coco_fields import (declares_boxes, declares_keypoints, declares_masks, read_target_arrays,
                                             target_faults, thin_boxes)
from dataio.formats.coco.coco_rle import rle_counts

from dataio.formats.dataset.manifest import Manifest
from dataio.formats.dataset.sample_table import SampleTable
from dataio.formats.dataset.verify_context import VerifyContext


def verify_targets(context: VerifyContext) -> None:
    """Every row whose targets are wrong, a problem each (one for the table when a column cannot be read)."""
    if context.table is not None:
        for row, reason in sorted(target_problems(context.manifest, context.table, context.deep).items()):
            context.sample_problem(row, reason)


def target_problems(manifest: Manifest, table: SampleTable, deep: bool) -> dict[int, str]:
    """Rows whose targets are wrong, with the reason ({} for a folder without box targets); row -1 for a
    column that cannot be read at all."""
    fields = manifest.sample_fields()
    if not declares_boxes(fields):
        return {}
    masks = declares_masks(fields)
    keypoints = len(manifest.options.get("keypoints") or ()) if declares_keypoints(fields) else 0
    if declares_keypoints(fields) and not keypoints:
        return {-1: "the keypoints column has no names in the manifest (options.keypoints): its points cannot be read"}
    try:
        targets = read_target_arrays(table.table, masks, keypoints)
    except ValueError as e:
        return {-1: str(e)}
    faults = target_faults(targets, table.width, table.height, len(manifest.classes))
    skip = np.zeros(len(table), bool)
    skip[list(faults)] = True
    faults.update(thin_boxes(targets, skip))
    if deep and masks:
        skip = np.zeros(len(table), bool)
        skip[list(faults)] = True
        found = targets.gather(np.arange(len(table)), skip=skip)
        owners = np.repeat(np.arange(len(table)), found.counts)
        for row, owner in zip(found.mask_rows.tolist(), owners.tolist(), strict=True):
            rle = targets.rle(row)
            if rle and owner not in faults:
                try:
                    rle_counts(rle, int(table.height[owner]), int(table.width[owner]))
                except ValueError as e:
                    faults[owner] = f"a mask is not an RLE of its {int(table.width[owner])}x" \
                                    f"{int(table.height[owner])} image ({e})"
    return faults
