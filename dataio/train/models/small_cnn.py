"""A small CNN for CPU runs: four conv-BN-ReLU stages and a linear head (~0.3 M parameters)."""

from __future__ import annotations

import torch
from torch import nn


class SmallCNN(nn.Module):
    def __init__(self, num_classes: int, width: int = 32) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for cout in (width, width * 2, width * 4, width * 4):
            layers += [nn.Conv2d(cin, cout, 3, 2, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))
