"""A small fully convolutional net for semantic segmentation on CPU runs (~0.29 M parameters).

Three conv-BN-ReLU stages at strides 2, 4 and 8, each with a 1x1 class head;
the coarser heads' logits are upsampled (bilinear) and added to the finer
ones (FCN-8s's skips), then upsampled to the input size: (N, classes, H, W).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


def _stage(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, 2, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class SmallFCN(nn.Module):
    def __init__(self, num_classes: int, width: int = 32) -> None:
        super().__init__()
        widths = (width, width * 2, width * 4)
        self.stages = nn.ModuleList(_stage(cin, cout) for cin, cout in zip((3, *widths[:-1]), widths, strict=True))
        self.heads = nn.ModuleList(nn.Conv2d(w, num_classes, 1) for w in widths)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = []
        out = x
        for stage in self.stages:
            out = stage(out)
            features.append(out)
        logits = self.heads[-1](features[-1])
        for head, feature in zip(reversed(self.heads[:-1]), reversed(features[:-1]), strict=True):
            logits = head(feature) + F.interpolate(logits, size=feature.shape[-2:], mode="bilinear",
                                                   align_corners=False)
        return F.interpolate(logits, size=x.shape[-2:], mode="bilinear", align_corners=False)
