"""Detection batches as torchvision's detection models take them: ``(images, targets)``, two lists.

torchvision's ``FasterRCNN``, ``RetinaNet``, ``SSD`` and ``MaskRCNN`` take a list of (3, H, W) float images and a
list of target dicts (``boxes`` (k, 4) float XYXY, ``labels`` (k,) int64, ``masks`` (k, H, W) uint8, and keypoint
R-CNN's ``keypoints`` (k, P, 3) x, y, visibility where the folder has COCO keypoints), and reserve
label 0 for the background: their ``num_classes`` counts it. So the labels here are the loader's plus one
(``len(loader.classes) + 1`` classes; a label's COCO id is ``loader.category_ids[label - 1]``). Each target also
holds ``image_id``, ``iscrowd`` and, in evaluation, ``orig_size``, ``scale``, ``offset`` and ``repeated``
(``map_back.to_original(output["boxes"], target)`` takes a prediction back to the image's pixels).
"""

from __future__ import annotations

from typing import Any

import torch

PER_IMAGE = ("image_id", "orig_size", "scale", "offset", "repeated")  # copied into each target where the batch has it


def torchvision_batch(batch: dict[str, Any]) -> tuple[list[torch.Tensor], list[dict[str, Any]]]:
    """One dict batch (``detection_finish``) as ``(images, targets)``; the images are views of the batch's."""
    images = list(batch["image"].unbind(0))
    valid, counts = batch["valid"], batch["num_boxes"].tolist()
    masks = batch.get("masks")
    first, targets = 0, []
    for i, count in enumerate(counts):
        mine = valid[i]
        target = {"boxes": batch["boxes"][i][mine], "labels": batch["labels"][i][mine] + 1,
                  "iscrowd": batch["iscrowd"][i][mine]}
        if masks is not None:
            target["masks"] = masks[first:first + count]
        if "keypoints" in batch:  # keypoint R-CNN's target: lined up with the boxes, as the dict batch holds them
            target["keypoints"] = batch["keypoints"][i][mine]
        first += count
        for name in PER_IMAGE:
            if name in batch:
                target[name] = batch[name][i] if name != "image_id" else int(batch[name][i])
        targets.append(target)
    return images, targets
