"""COCO-shaped JSON files that are not COCO instances: LVIS (read as instances) and panoptic (refused).

- LVIS (v0.5, v1) is COCO instances with one difference in its images: no ``file_name``, a ``coco_url``
  (``http://images.cocodataset.org/train2017/000000391895.jpg``). LVIS's images are COCO 2017's, its val split
  drawing from both COCO folders, so the file is the URL's last two parts (``train2017/000000391895.jpg``) under
  IMAGES, COCO's root: detectron2's LVIS loader (``get_file_name``) joins the same two parts to its image root.
  Its ``not_exhaustive_category_ids`` and ``neg_category_ids`` are evaluation data, kept in the JSON: the
  packed ``image_id`` is LVIS's, so LVIS's own evaluation reads them there.
- Panoptic segmentation JSON holds per image one annotation with a PNG ``file_name`` and ``segments_info``,
  no ``bbox``: read as instances, every annotation was rejected and 0 boxes were packed with exit 0. It is
  refused whole, in one line naming the instances JSON to give instead.
"""

from __future__ import annotations

from typing import Any

from dataio.formats.errors import DataioError


def lvis_file_name(entry: dict) -> str | None:
    """An LVIS image's file under COCO's root (``train2017/NAME.jpg``) from its ``coco_url``; None without one."""
    url = entry.get("coco_url")
    if not isinstance(url, str) or url.count("/") < 2:
        return None
    return "/".join(url.split("?", 1)[0].rstrip("/").split("/")[-2:])


def refuse_other_coco_tasks(document: dict[str, Any], where: str) -> None:
    """DataioError in one line for a COCO-shaped JSON of another task dataio does not pack (panoptic)."""
    annotations = document.get("annotations")
    if not isinstance(annotations, list):
        return
    panoptic = sum(isinstance(a, dict) and "segments_info" in a and "bbox" not in a for a in annotations)
    if panoptic:
        raise DataioError(f"{where}: a COCO panoptic segmentation JSON ({panoptic:,} annotations hold segments_info "
                          "and no bbox), which dataio does not pack: give the instances JSON of the same images "
                          "(instances_*.json) to dataio convert coco")
