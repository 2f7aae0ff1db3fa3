"""``dataio.DetectionLoader``: images with box (and mask) targets (``dataio convert coco``) as dict batches.

The image kinds' face (``dataio.images.kind_loader``) over a box folder: the images cropped (SSD's box-constrained
crop, or RandomResizedCrop), flipped, resized and augmented with their targets mapped through the same draws
(``dataio.detection.detection_batches``, ``detection_finish``), as ``targets`` says (``DetectionConfig``). The
dict: ``image``, ``boxes``, ``labels``, ``valid``, ``num_boxes``, ``iscrowd``, ``masks``, ``image_id``,
``sample_ids``, ``repeated`` (docs/detection.md). Every other keyword is ``ImageLoader``'s or DataLoader's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dataio.detection.detection_config import DetectionConfig
from dataio.images.config import ImageLoaderConfig
from dataio.images.kind_loader import ImageKindLoader
from dataio.loader.dataloader_args import Capabilities


class DetectionLoader(ImageKindLoader):
    """``DetectionLoader(folder, targets=DetectionConfig(...), batch_size=..., image_size=..., ...)``: dict batches of
    images and their targets; ``classes`` and ``category_ids`` name the labels."""

    face = Capabilities(name="DetectionLoader", threads=True)

    def __init__(self, source: str | Path | Mapping[str, str | Path], config: ImageLoaderConfig | None = None, *,
                 targets: DetectionConfig | None = None, **options: Any) -> None:
        """Open the box folder (or URL, or a mixture's ``{name: folder}`` with ``weights``) ``source``; ``targets``
        says which crop, filters and masks (default ``DetectionConfig()``), ``options`` are ``ImageLoader``'s."""
        self._build_face(source, config, kind="detection", keyword="targets", options=targets, keywords=options)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return super().__iter__()

    def batches(self) -> Iterator[dict[str, Any]]:
        """As ``for batch in loader``: the dicts carry ``sample_ids`` and ``repeated`` already."""
        return super().batches()

    @property
    def targets(self) -> DetectionConfig:
        """The target options in use."""
        return self.options or DetectionConfig()
