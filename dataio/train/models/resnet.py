"""ResNet-18/50 (He et al.) defined in-repo: no torchvision.

Follows the usual training recipe's choices: no bias in convolutions that
feed a BatchNorm, Kaiming init, and the last BatchNorm of each residual
branch initialised to zero gamma, so every block starts as the identity.
"""

from __future__ import annotations

import torch
from torch import nn


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, relu: bool = True) -> list[nn.Module]:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False), nn.BatchNorm2d(cout)]
    return layers + ([nn.ReLU(inplace=True)] if relu else [])


class Block(nn.Module):
    """Basic (two 3x3) or bottleneck (1x1, 3x3, 1x1) residual block."""

    def __init__(self, cin: int, width: int, stride: int, bottleneck: bool) -> None:
        super().__init__()
        cout = width * 4 if bottleneck else width
        if bottleneck:
            layers = _conv_bn(cin, width, 1) + _conv_bn(width, width, 3, stride) + _conv_bn(width, cout, 1, relu=False)
        else:
            layers = _conv_bn(cin, width, 3, stride) + _conv_bn(width, cout, 3, relu=False)
        self.branch = nn.Sequential(*layers)
        nn.init.zeros_(self.branch[-1].weight)  # zero-init the last BN gamma: the block starts as identity
        self.shortcut = (nn.Identity() if stride == 1 and cin == cout
                         else nn.Sequential(*_conv_bn(cin, cout, 1, stride, relu=False)))
        self.out_channels = cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.branch(x) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, depths: tuple[int, ...], bottleneck: bool, num_classes: int) -> None:
        super().__init__()
        layers = _conv_bn(3, 64, 7, 2) + [nn.MaxPool2d(3, 2, 1)]
        channels = 64
        for stage, depth in enumerate(depths):
            for index in range(depth):
                block = Block(channels, 64 * 2 ** stage, 2 if index == 0 and stage > 0 else 1, bottleneck)
                layers.append(block)
                channels = block.out_channels
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(channels, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


def resnet18(num_classes: int) -> ResNet:
    return ResNet((2, 2, 2, 2), bottleneck=False, num_classes=num_classes)


def resnet50(num_classes: int) -> ResNet:
    return ResNet((3, 4, 6, 3), bottleneck=True, num_classes=num_classes)
