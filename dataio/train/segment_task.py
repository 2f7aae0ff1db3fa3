"""What ``dataio train --task segment`` does with COCO shards: semantic segmentation from the instance masks.

The loaders read the folders' masks (``DetectionConfig(masks=True)``): training
batches through RandomResizedCrop, the flip and RandAugment's warps, every
visible object kept; validation the whole image resized. Each batch's
instance masks become one class map per image (``semantic_targets``: 0 the
background, a category's label + 1 its pixels, crowd regions ignored), the
model (``small_cnn``: a small FCN) is trained with per-pixel cross-entropy, and
each validation set reports its mean IoU over the classes present (the
background's included, as in Pascal VOC and ADE20K) from a confusion matrix
summed over ranks, and its loss. MixUp and CutMix are refused: they have no
rule for masks. So is a folder in which an object has no segmentation (box-only
annotations merged in: ``require_masks``): its all-zero mask would train and
score its pixels as background.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, cast

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

from dataio.augment import RandAugmentConfig
from dataio.detection.detection_config import DetectionConfig
from dataio.detection.loader import DetectionLoader
from dataio.detection.target_columns import ObjectsWithoutMasks
from dataio.images.kind_loader import ImageKindLoader
from dataio.formats.errors import ConfigError
from dataio.train.config import TrainConfig
from dataio.train.image_task import IMAGE_OPTIONS, ImageTask, _schedule, image_options
from dataio.train.mixture_counts import ReadTally
from dataio.train.models import SEGMENT_MODELS, build_segment_model
from dataio.train.set_options import train_options, val_options
from dataio.train.task_choice import RunData
from dataio.train.val_sets import val_metrics, val_sets

IGNORE = -100  # cross-entropy's ignore_index: crowd regions
CROWD = 32767  # their value while the class maps are built (int16: above any label + 1, so a crowd wins)
# every object's mask required: a box-only object's pixels would be trained and scored as background (refused)
TRAIN_TARGETS = DetectionConfig(masks=True, crop="random_resized", min_visible=0.0, min_side=0.0, require_masks=True)
VAL_TARGETS = DetectionConfig(masks=True, eval_crop="whole", min_visible=0.0, min_side=0.0, require_masks=True)


def semantic_targets(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """(N, S, S) int64 class maps from a batch's instance masks: label + 1 where an object is (the larger label
    where two overlap), 0 elsewhere, ``IGNORE`` under a crowd region."""
    n, size = len(batch["num_boxes"]), batch["image"].shape[-1]
    valid = batch["valid"]
    values = torch.where(batch["iscrowd"][valid], CROWD, batch["labels"][valid] + 1).to(torch.int16)
    masks = batch["masks"]
    out = torch.zeros((n, size, size), dtype=torch.int16, device=masks.device)
    ends = torch.cumsum(batch["num_boxes"], 0).tolist()
    for i, (start, end) in enumerate(zip([0, *ends[:-1]], ends, strict=True)):
        if end > start:
            out[i] = (masks[start:end] * values[start:end, None, None]).amax(dim=0)
    targets = out.long()
    targets[targets == CROWD] = IGNORE
    return targets


NO_MIX = "(MixUp/CutMix) has no rule for masks: leave it off for --task segment"


class SegmentTask(ImageTask):
    """Train on ``config.train`` COCO shards' masks, report mean IoU on ``config.val``."""

    name: ClassVar[str] = "segment"
    kinds: ClassVar[tuple[str, ...]] = ("detection",)
    needs: ClassVar[Mapping[str, str]] = {"masks": "pack COCO instances with segmentations with `dataio convert coco`"}
    # a box folder's own task, detection, is not dataio train's: segmenting its masks is asked for, never guessed
    not_auto: ClassVar[str] = ("holds boxes (COCO): --task segment trains on its masks; give it to train on them "
                               "(auto does not pick it: dataio train has no box detection task)")
    options: ClassVar[frozenset[str]] = IMAGE_OPTIONS | {"randaugment", "progressive", "dynamic_batch"}
    refused: ClassVar[Mapping[str, str]] = {"mixup": NO_MIX, "cutmix": NO_MIX}
    val_metrics = ("miou", "loss")

    def __init__(self, config: TrainConfig, device: torch.device, *, data: RunData | None = None) -> None:
        c = config
        if c.model not in SEGMENT_MODELS:
            raise ConfigError(f"{{0}} {c.model!r} is no segmentation model (--task segment); choose from "
                              f"{', '.join(sorted(SEGMENT_MODELS))}", "model")
        self.config, self.device = c, device
        common = image_options(c, device)
        options, val_options_of = train_options(c), val_options(c)
        mixture = self._mixture((data or RunData(c)).samples) if c.mixture else {}
        self.schedule = _schedule(c)
        try:
            self._open_loaders(c, common, options, val_options_of, mixture)
        except ObjectsWithoutMasks as e:  # the task and the data together: named as --task segment's refusals are
            if hasattr(self, "train_loader"):  # a validation set's objects: the train loader's threads closed first
                self.train_loader.close()
            raise ConfigError(f"{{0}} segment trains and scores every object's pixels as its class: {e}; pack them "
                              "with segmentations, or leave them out of the JSON", "task") from None
        self.tally = ReadTally(self.train_loader, c.weights.names) if c.mixture else None

    def _open_loaders(self, c: TrainConfig, common: dict[str, Any], options: Any, val_options_of: dict[str, Any],
                      mixture: dict[str, Any]) -> None:
        self.train_loader = DetectionLoader(
            c.train, batch_size=c.batch_size, image_size=c.image_size, train=True, schedule=self.schedule,
            randaugment=RandAugmentConfig(magnitude=c.randaugment) if c.randaugment else None, **mixture,
            storage_options=options, targets=TRAIN_TARGETS, **common)
        self.num_classes = len(self.train_loader.classes)
        if self.num_classes >= CROWD - 1:
            raise ConfigError(f"{{0}} segment keeps up to {CROWD - 2} categories, the data has "
                              f"{self.num_classes}", "task")
        self.val_loaders = {name: DetectionLoader(folder, batch_size=c.batch_size, image_size=c.image_size,
                                                  train=False, storage_options=val_options_of[name],
                                                  targets=VAL_TARGETS, **common)
                            for name, folder in val_sets(c.val).items()}
        for name, loader in self.val_loaders.items():
            if tuple(loader.classes) != tuple(self.train_loader.classes):
                raise ValueError(f"val set {name}: its categories {list(loader.classes)[:6]} are not the train "
                                 f"folder's {list(self.train_loader.classes)[:6]} (same names, same order)")

    def build_model(self) -> nn.Module:
        model = build_segment_model(self.config.model, self.num_classes + 1)  # + the background
        return model.to(memory_format=torch.channels_last) if self.config.channels_last else model

    def loss(self, model: nn.Module, batch: Any) -> tuple[torch.Tensor, int]:
        """Per-pixel cross-entropy of a dict batch (``semantic_targets``), crowd regions ignored."""
        logits = model(batch["image"])
        return F.cross_entropy(logits.float(), semantic_targets(batch), ignore_index=IGNORE), len(logits)

    @torch.no_grad()
    def evaluate(self, model: nn.Module) -> dict[str, float]:
        """Mean IoU and loss of each validation set (padding repeats dropped), summed over ranks."""
        if not self.val_loaders:
            return {}
        model.eval()
        totals = {name: self._evaluate_masks(model, loader) for name, loader in self.val_loaders.items()}
        model.train()
        return val_metrics(totals, _miou_and_loss, named=isinstance(self.config.val, dict))

    def _evaluate_masks(self, model: nn.Module, loader: ImageKindLoader) -> list[float]:
        """The confusion matrix, flattened, then the loss sum and the pixel count (``val_metrics``'s totals)."""
        classes = self.num_classes + 1
        confusion = torch.zeros(classes * classes, dtype=torch.float64, device=self.device)
        sums = torch.zeros(2, dtype=torch.float64, device=self.device)
        loader.set_epoch(0)
        for batch in cast(Iterator[dict[str, torch.Tensor]], iter(loader)):
            keep = ~batch["repeated"].to(self.device)
            targets, logits = semantic_targets(batch)[keep], model(batch["image"][keep]).float()
            losses = F.cross_entropy(logits, targets, ignore_index=IGNORE, reduction="sum")
            counted = targets != IGNORE
            pairs = targets[counted] * classes + logits.argmax(1)[counted]
            confusion += torch.bincount(pairs, minlength=classes * classes).double()
            sums += torch.stack([losses.double(), counted.sum().double()])
        totals = torch.cat([confusion, sums])
        if dist.is_initialized():
            dist.all_reduce(totals)
        return totals.tolist()


def _miou_and_loss(totals: list[float]) -> dict[str, float]:
    """Mean IoU over the classes present in the targets or predictions, and the loss per pixel."""
    *cells, loss, pixels = totals
    classes = int(round(len(cells) ** 0.5))
    confusion = torch.tensor(cells, dtype=torch.float64).view(classes, classes)
    true, predicted, hits = confusion.sum(1), confusion.sum(0), confusion.diag()
    union = true + predicted - hits
    present = union > 0
    miou = float((hits[present] / union[present]).mean()) if bool(present.any()) else 0.0
    return {"miou": miou, "loss": loss / max(pixels, 1.0)}
