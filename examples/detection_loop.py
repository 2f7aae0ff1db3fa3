"""A detector trained in your own loop on COCO shards: ``dataio.DetectionLoader`` batches of images with their boxes.

``dataio convert coco`` packs the images with their boxes, labels and masks; the
loader reads them with the targets carried through its own crop (SSD's crop
constrained by box overlap, in the manner of DALI's ``random_bbox_crop``), resize
and flip, so each batch is a dict: ``image`` (N, 3, S, S) float32 normalised
(``normalize=True``: the model here does not normalise its input; torchvision's
detection models do, and take the loader's default [0, 1] floats instead),
``boxes`` (N, K, 4) xyxy in the output's pixels padded to the batch's busiest
image, ``labels`` (N, K) with -1 in the padding, ``valid`` (N, K). No torchvision:
the model is a tiny CenterNet written here (a class heatmap, a box size and a
centre offset per cell of a stride-8 grid), trained with CenterNet's focal loss and
evaluated as VOC does, AP at IoU 0.5 averaged over the classes.

    dataio convert coco coco/train2017 coco/annotations/instances_train2017.json DATA/train
    dataio convert coco coco/val2017 coco/annotations/instances_val2017.json DATA/val
    python examples/detection_loop.py DATA --epochs 24 --image-size 320 --batch-size 32 --workers 8

A quick CPU run: ``--epochs 2 --image-size 96 --batch-size 4 --steps 3``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import dataio

STRIDE = 8  # the grid's cell in the output's pixels


def conv(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class TinyCenterNet(nn.Module):
    """Three stride-2 stages to a stride-8 grid; per cell: class logits, box size and centre offset (in cells)."""

    def __init__(self, classes: int, width: int = 32) -> None:
        super().__init__()
        self.body = nn.Sequential(conv(3, width, 2), conv(width, width), conv(width, 2 * width, 2),
                                  conv(2 * width, 2 * width), conv(2 * width, 4 * width, 2), conv(4 * width, 4 * width))
        self.heat = nn.Sequential(conv(4 * width, 4 * width), nn.Conv2d(4 * width, classes, 1))
        self.box = nn.Sequential(conv(4 * width, 4 * width), nn.Conv2d(4 * width, 4, 1))
        nn.init.constant_(self.heat[-1].bias, -2.19)  # CenterNet's prior: sigmoid 0.1 at the start

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.body(images)
        return self.heat(features), self.box(features)  # (N, C, G, G) logits, (N, 4, G, G) w, h, dx, dy


def grid_targets(batch: dict, classes: int, grid: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A Gaussian peak per box at its centre cell (heat), and w, h, dx, dy in cells there (where: the cells)."""
    n = len(batch["boxes"])
    heat = torch.zeros(n, classes, grid, grid)
    boxes = torch.zeros(n, 4, grid, grid)
    where = torch.zeros(n, grid, grid, dtype=torch.bool)
    cells = torch.arange(grid, dtype=torch.float32)
    for i, k in batch["valid"].nonzero().tolist():  # the padding (valid False, label -1) left out
        x0, y0, x1, y1 = (batch["boxes"][i, k] / STRIDE).tolist()
        cx, cy = min((x0 + x1) / 2, grid - 1e-3), min((y0 + y1) / 2, grid - 1e-3)
        ix, iy = int(cx), int(cy)
        sigma = max(min(x1 - x0, y1 - y0) / 6, 0.5)  # a peak as wide as a sixth of the box's shorter side
        peak = torch.exp(-((cells - ix)[None, :] ** 2 + (cells - iy)[:, None] ** 2) / (2 * sigma ** 2))
        label = int(batch["labels"][i, k])
        heat[i, label] = torch.maximum(heat[i, label], peak)
        boxes[i, :, iy, ix] = torch.tensor([x1 - x0, y1 - y0, cx - ix, cy - iy])
        where[i, iy, ix] = True
    return heat, boxes, where


def detection_loss(heat_logits: torch.Tensor, box_out: torch.Tensor, batch: dict) -> tuple[torch.Tensor, dict]:
    """CenterNet's penalty-reduced focal loss on the heatmap, L1 on size (x0.1) and offset at the box centres."""
    heat, boxes, where = grid_targets(batch, heat_logits.shape[1], heat_logits.shape[-1])
    p = heat_logits.sigmoid().clamp(1e-4, 1 - 1e-4)
    peak = heat == 1
    positives = (torch.log(p) * (1 - p) ** 2)[peak].sum()
    negatives = (torch.log(1 - p) * p ** 2 * (1 - heat) ** 4)[~peak].sum()
    focal = -(positives + negatives) / max(int(peak.sum()), 1)
    at = where[:, None].expand_as(box_out)
    count = max(int(where.sum()), 1)
    size = F.l1_loss(box_out[:, :2][at[:, :2]], boxes[:, :2][at[:, :2]], reduction="sum") / count
    offset = F.l1_loss(box_out[:, 2:][at[:, 2:]], boxes[:, 2:][at[:, 2:]], reduction="sum") / count
    parts = {"heat": focal.detach().item(), "size": size.detach().item(), "offset": offset.detach().item()}
    return focal + 0.1 * size + offset, parts


def decode(heat_logits: torch.Tensor, box_out: torch.Tensor, top: int = 20) -> list[tuple[torch.Tensor, ...]]:
    """Per image: (boxes xyxy in pixels, scores, labels) of the ``top`` local maxima of the heatmap (CenterNet's
    3x3 max-pool in place of NMS)."""
    p = heat_logits.sigmoid()
    p = p * (F.max_pool2d(p, 3, 1, 1) == p)
    n, classes, grid, _ = p.shape
    scores, index = p.flatten(1).topk(min(top, classes * grid * grid))
    labels, cell = index // (grid * grid), index % (grid * grid)
    iy, ix = cell // grid, cell % grid
    out = []
    for i in range(n):
        w, h, dx, dy = box_out[i][:, iy[i], ix[i]]
        cx, cy = ix[i] + dx, iy[i] + dy
        xyxy = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1) * STRIDE
        out.append((xyxy, scores[i], labels[i]))
    return out


def box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(len(a), len(b)) IoU of xyxy boxes."""
    low, high = torch.maximum(a[:, None, :2], b[None, :, :2]), torch.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = (high - low).clamp(min=0).prod(2)
    area_a, area_b = ((x[:, 2:] - x[:, :2]).clamp(min=0).prod(1) for x in (a, b))
    return inter / (area_a[:, None] + area_b[None, :] - inter).clamp(min=1e-9)


def average_precision(detections: list, truths: list, classes: int, threshold: float = 0.5) -> tuple[float, float]:
    """VOC's all-point AP at IoU ``threshold`` averaged over the classes with boxes, and the recall of all boxes at
    any score. ``detections``/``truths``: per image (boxes, scores, labels) / (boxes, labels)."""
    aps, found, total = [], 0, 0
    for c in range(classes):
        ranked, matched, count = [], {}, 0
        for image, ((boxes, scores, labels), (true_boxes, true_labels)) in enumerate(zip(detections, truths)):
            mine = true_boxes[true_labels == c]
            matched[image], count = torch.zeros(len(mine), dtype=torch.bool), count + len(mine)
            ranked += [(float(s), image, b, mine) for b, s in zip(boxes[labels == c], scores[labels == c])]
        if count == 0:
            continue
        hits = []
        for _, image, box, mine in sorted(ranked, key=lambda r: -r[0]):
            overlaps = box_iou(box[None], mine)[0] if len(mine) else torch.zeros(0)
            best = int(overlaps.argmax()) if len(overlaps) else -1
            hit = best >= 0 and overlaps[best] >= threshold and not matched[image][best]
            if hit:
                matched[image][best] = True
            hits.append(hit)
        tp = torch.tensor(hits, dtype=torch.float64).cumsum(0)
        recall = tp / count
        precision = tp / torch.arange(1, len(hits) + 1)
        envelope = torch.flip(torch.cummax(torch.flip(precision, [0]), 0).values, [0])  # precision made monotone
        steps = torch.diff(recall, prepend=torch.zeros(1))
        aps.append(float((envelope * steps).sum()))
        found, total = found + int(sum(int(m.sum()) for m in matched.values())), total + count
    return (sum(aps) / len(aps) if aps else 0.0), found / max(total, 1)


@torch.no_grad()
def evaluate(model: nn.Module, loader: dataio.DetectionLoader) -> str:
    model.eval()
    detections, truths = [], []
    for batch in loader:
        keep = ~batch["repeated"]  # padding repeats on the last batch of a rank: each image counted once
        heat_logits, box_out = model(batch["image"][keep])
        detections += decode(heat_logits, box_out)
        for boxes, labels, valid in zip(batch["boxes"][keep], batch["labels"][keep], batch["valid"][keep]):
            truths.append((boxes[valid], labels[valid]))
    model.train()
    ap, recall = average_precision(detections, truths, len(loader.classes))
    return (f"val: {len(truths)} images, {sum(len(t[1]) for t in truths)} boxes, AP50={ap:.3f} "
            f"recall50={recall:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="DATA/train and DATA/val: shard folders of `dataio convert coco`")
    parser.add_argument("--epochs", type=int, default=24)
    parser.add_argument("--steps", type=int, help="stop each epoch after this many steps (a quick run)")
    parser.add_argument("--image-size", type=int, default=320)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--workers", type=int, default=4, help="decode threads")
    parser.add_argument("--print-freq", type=int, default=10)
    args = parser.parse_args()
    torch.manual_seed(0)
    # crowd=False: COCO's crowd regions are no boxes to find; min_visible: a box cut below a third is dropped.
    # normalize=True: this model does not normalise its input (torchvision's detectors do: leave it out for them)
    targets = dataio.DetectionConfig(crop="bbox", crowd=False, min_visible=0.33)
    train = dataio.DetectionLoader(args.data / "train", batch_size=args.batch_size, image_size=args.image_size,
                                   train=True, normalize=True, num_workers=args.workers, targets=targets)
    val = dataio.DetectionLoader(args.data / "val", batch_size=args.batch_size, image_size=args.image_size,
                                 train=False, normalize=True, num_workers=args.workers,
                                 targets=dataio.DetectionConfig(eval_crop="whole", crowd=False))
    model = TinyCenterNet(len(train.classes))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    steps = min(len(train), args.steps or len(train))
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, args.lr, total_steps=args.epochs * steps)
    with train, val:
        for epoch in range(args.epochs):
            train.set_epoch(epoch)
            start = time.perf_counter()
            for step, batch in enumerate(train):
                if step == steps:
                    break
                heat_logits, box_out = model(batch["image"])
                loss, parts = detection_loss(heat_logits, box_out, batch)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                schedule.step()
                if step % args.print_freq == 0 or step == steps - 1:
                    print(f"epoch {epoch} step {step + 1}/{steps} loss={loss.item():.4f} heat={parts['heat']:.4f} "
                          f"size={parts['size']:.3f} offset={parts['offset']:.3f} boxes={int(batch['valid'].sum())} "
                          f"{time.perf_counter() - start:.1f}s", flush=True)
            print(f"epoch {epoch} {evaluate(model, val)}", flush=True)


if __name__ == "__main__":
    main()
