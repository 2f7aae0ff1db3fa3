"""The baseline of the detection benchmark: the standard detection input recipe over the COCO files.

What torchvision's detection references and most detection scripts run: a ``Dataset``
over the image files and the instances JSON (parsed once with ``json``, as
pycocotools' ``COCO`` does; each image's annotations grouped by image id; boxes
xywh -> xyxy; category ids mapped to contiguous labels), PIL to open and decode each
image, then a per-sample transform that moves the boxes with the pixels: SSD's crop
constrained by box overlap (torchvision's ``RandomIoUCrop``: boxes whose centre
leaves the window dropped, the rest clipped to it), a horizontal flip, the resize to
``size x size`` (PIL's bilinear, antialiased) and ``PILToTensor``; boxes under a pixel
a side dropped (``SanitizeBoundingBoxes``). ``DataLoader`` worker processes run it,
and a collate function pads the boxes to the batch's busiest image, as dataio's
batches are padded: ``image`` (N, 3, S, S) uint8, ``boxes`` (N, K, 4) xyxy in output
pixels, ``labels`` (N, K) with -1 padding, ``valid`` (N, K).

torchvision does not import here, so the crop windows are drawn by
``augment.bbox_crop`` (SSD's sampler, the options of DALI's SSD example, the same
distribution dataio's loader draws from: the same work per image) and the rest is
PIL and numpy, one sample at a time, as torchvision's v2 transforms do it.
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from dataio.augment.bbox_crop import BBoxCropConfig, bbox_crop_boxes
from dataio.formats.coco.coco_json import MAX_ANNOTATIONS_BYTES
from dataio.formats.file_gate import read_input
from dataio.formats.limits import MAX_FILE_BYTES
from dataio.bench.image_baselines import Epoch, _dataloader_epoch


class SsdStyleTrainTransform:
    """RandomIoUCrop + RandomHorizontalFlip + Resize(size) + PILToTensor on a PIL image and its xyxy boxes."""

    def __init__(self, size: int, seed: int = 0, crop: BBoxCropConfig = BBoxCropConfig()) -> None:
        self.size, self.crop = size, crop
        self.rng = np.random.default_rng(seed)

    def __call__(self, image: Image.Image, boxes: np.ndarray,
                 labels: np.ndarray) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
        crops, centre_inside = bbox_crop_boxes(np.array([image.width]), np.array([image.height]), boxes,
                                               np.array([len(boxes)]), self.rng, self.crop)
        x0, y0, x1, y1 = (int(v) for v in crops[0])
        width, height = x1 - x0, y1 - y0
        boxes, labels = boxes[centre_inside], labels[centre_inside]
        image = image.crop((x0, y0, x1, y1)).resize((self.size, self.size), Image.BILINEAR)
        boxes = np.clip(boxes - [x0, y0, x0, y0], 0, [width, height, width, height])
        scale = np.array([self.size / width, self.size / height] * 2)
        boxes = (boxes * scale).astype(np.float32)
        if self.rng.random() < 0.5:
            image = image.transpose(Image.FLIP_LEFT_RIGHT)
            boxes[:, [0, 2]] = self.size - boxes[:, [2, 0]]
        keep = (boxes[:, 2] - boxes[:, 0] >= 1) & (boxes[:, 3] - boxes[:, 1] >= 1)
        return torch.from_numpy(np.array(image)).permute(2, 0, 1), boxes[keep], labels[keep]


class CocoBoxesDataset(torch.utils.data.Dataset):
    """The images of a COCO instances JSON with their boxes and labels (``image_ids``: these, in this order)."""

    def __init__(self, images: Path, annotations: Path, transform: SsdStyleTrainTransform,
                 image_ids: list[int] | None = None) -> None:
        document = json.loads(read_input(annotations, MAX_ANNOTATIONS_BYTES))
        label_of = {c["id"]: i for i, c in enumerate(sorted(document["categories"], key=lambda c: c["id"]))}
        objects: dict[int, list[dict]] = defaultdict(list)
        for annotation in document["annotations"]:
            objects[annotation["image_id"]].append(annotation)
        files = {image["id"]: image["file_name"] for image in document["images"]}
        self.root, self.transform = Path(images), transform
        self.samples = []
        for image_id in image_ids if image_ids is not None else list(files):
            xywh = np.array([a["bbox"] for a in objects[image_id]], np.float64).reshape(-1, 4)
            labels = np.array([label_of[a["category_id"]] for a in objects[image_id]], np.int64)
            self.samples.append((files[image_id], np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], 1),
                                 labels))

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
        name, boxes, labels = self.samples[index]
        data = read_input(self.root / name, MAX_FILE_BYTES, root=self.root)  # the gate: no link out of the folder
        image = Image.open(io.BytesIO(data)).convert("RGB")
        return self.transform(image, boxes, labels)


def pad_boxes(samples: list[tuple[torch.Tensor, np.ndarray, np.ndarray]]) -> dict[str, torch.Tensor]:
    """Stacked images; boxes and labels padded to the busiest image (labels -1 there), and ``valid``."""
    most = max((len(boxes) for _, boxes, _ in samples), default=0)
    boxes = torch.zeros((len(samples), most, 4), dtype=torch.float32)
    labels = torch.full((len(samples), most), -1, dtype=torch.int64)
    for i, (_, own_boxes, own_labels) in enumerate(samples):
        boxes[i, :len(own_boxes)] = torch.from_numpy(own_boxes)
        labels[i, :len(own_labels)] = torch.from_numpy(own_labels)
    return {"image": torch.stack([image for image, _, _ in samples]), "boxes": boxes, "labels": labels,
            "valid": labels >= 0}


def _worker_init(worker_id: int) -> None:
    info = torch.utils.data.get_worker_info()
    info.dataset.transform.rng = np.random.default_rng(1000 + worker_id)  # each worker its own crops


def make_standard_detection(images: Path, annotations: Path, *, batch_size: int, size: int, num_workers: int,
                            image_ids: list[int] | None = None) -> Epoch:
    """The standard recipe under ``DataLoader(num_workers, shuffle=True)``; each batch is a dict (``pad_boxes``)."""
    dataset = CocoBoxesDataset(images, annotations, SsdStyleTrainTransform(size), image_ids)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                                         collate_fn=pad_boxes, persistent_workers=num_workers > 0,
                                         worker_init_fn=_worker_init)
    base = _dataloader_epoch(loader)  # its worker handling, counting dict batches' images
    return Epoch(base.batches, lambda batch: len(batch["image"]), base.close,  # type: ignore[index]
                 worker_pids=base.worker_pids)
