"""``dataio.DetectionLoader``: images with box (and mask) targets (``dataio convert coco``) as dict batches.

The image kinds' face (``dataio.images.kind_loader``) over a box folder: the images cropped (SSD's box-constrained
crop, or RandomResizedCrop), flipped, resized and augmented with their targets mapped through the same draws
(``dataio.detection.detection_batches``, ``detection_finish``), as ``targets`` says (``DetectionConfig``). The
dict: ``image``, ``boxes``, ``labels``, ``valid``, ``num_boxes``, ``iscrowd``, ``masks``, ``image_id``,
``sample_ids``, ``repeated`` (docs/detection.md). Every other keyword is ``ImageLoader``'s or DataLoader's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dataio.detection.detection_config import DetectionConfig
from dataio.detection.torchvision_layout import torchvision_batch
from dataio.images.config import ImageLoaderConfig
from dataio.images.kind_loader import ImageKindLoader
from dataio.loader.dataloader_args import Capabilities

log = logging.getLogger("dataio")


class DetectionLoader(ImageKindLoader):
    """``DetectionLoader(folder, targets=DetectionConfig(...), batch_size=..., image_size=..., ...)``: dict batches of
    images and their targets; ``classes`` and ``category_ids`` name the labels."""

    face = Capabilities(name="DetectionLoader", threads=True)

    def __init__(self, source: str | Path | Mapping[str, str | Path], config: ImageLoaderConfig | None = None, *,
                 targets: DetectionConfig | None = None, **options: Any) -> None:
        """Open the box folder (or URL, or a mixture's ``{name: folder}`` with ``weights``) ``source``; ``targets``
        says which crop, filters and masks (default ``DetectionConfig()``), ``options`` are ``ImageLoader``'s."""
        self._build_face(source, config, kind="detection", keyword="targets", options=targets, keywords=options)

    def __iter__(self) -> Iterator[Any]:
        """Dict batches, or ``(images, targets)`` lists with ``DetectionConfig(layout="torchvision")``."""
        if self.targets.layout == "torchvision":
            return map(torchvision_batch, super().__iter__())
        return super().__iter__()

    @classmethod
    def dropin_defaults(cls, options: dict[str, Any], *, where: str, shuffles: bool) -> None:
        """As the image kinds' (``ImageKindLoader.dropin_defaults``), but not normalised unless asked: a detection
        model normalises itself (torchvision's ``GeneralizedRCNNTransform``), so the images are [0, 1] floats
        (``DetectionConfig.pixels``); normalising here too fed its backbone a mean of -2.55 and a std of 5.93."""
        if options.get("config") is not None:
            return
        options.setdefault("normalize", False)
        options.setdefault("channels_last", False)  # contiguous NCHW, as DataLoader stacks
        if "train" not in options:
            options["train"] = shuffles
        pixels = (options.get("targets") or DetectionConfig()).pixels
        output = "float32 normalised" if options["normalize"] else "float32 in [0, 1]" if pixels == "float" else "uint8"
        log.info("dataio.DataLoader(%s): detection %s transforms; %s output", where,
                 "training" if options["train"] else "evaluation", output)

    def batches(self) -> Iterator[dict[str, Any]]:
        """As ``for batch in loader``: the dicts carry ``sample_ids`` and ``repeated`` already."""
        return super().batches()

    @property
    def targets(self) -> DetectionConfig:
        """The target options in use."""
        return self.options or DetectionConfig()
