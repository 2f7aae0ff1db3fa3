"""``ShardDataset[i]`` of a folder read as multi-crop views: ``(image, label)`` as classification's item decodes it,
label -1 for a folder without classes, so a script's own per-sample views (DINOv2's ``DataAugmentationDINO`` as its
``transform``) run in ``torch.utils.data.DataLoader`` workers as with torchvision's ``ImageFolder``."""

from __future__ import annotations

from typing import Any

from dataio.images.image_item import ClassItem


class ViewItem(ClassItem):
    """An image of a views folder (or of any image folder) and its label, -1 without classes."""

    def __call__(self, index: int) -> Any:
        labels = self.reader.table.label
        return self.image(index), -1 if labels is None else int(labels[index])
