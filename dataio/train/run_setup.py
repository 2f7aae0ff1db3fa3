"""What a training run is set up with before its first step: its device, its output folder, its precision, its
optimizer (``dataio train``'s ``Trainer``)."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from dataio.formats.errors import ConfigError, UsageError
from dataio.formats.file_gate import create_new
from dataio.train.config import TrainConfig


def run_device(config: TrainConfig) -> torch.device:
    """The device to train on; ConfigError naming ``device`` when the one asked for is not on this machine."""
    if config.device == "auto":
        return torch.device(f"cuda:{config.local_rank}" if torch.cuda.is_available() else "cpu")
    device = torch.device(config.device)
    if device.type == "cuda" and not (torch.cuda.is_available() and (device.index or 0) < torch.cuda.device_count()):
        found = f"{torch.cuda.device_count()} CUDA device(s)" if torch.cuda.is_available() else "no CUDA device"
        raise ConfigError(f"{{0}} {config.device}: this machine has {found}", "device")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"{{0}} {config.device}: MPS is not available on this machine", "device")
    return device


def output_folder(out: Path) -> None:
    """OUT must be a folder this process can write, checked before training rather than at the first checkpoint."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"output {out} exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"
        os.close(create_new(probe))  # created by this call, never through a link planted at its guessable name
        probe.unlink()
    except OSError as e:
        raise UsageError(f"output folder {out} cannot be written: {e.strerror or e}") from None


def amp_dtype(config: TrainConfig, device: torch.device) -> torch.dtype | None:
    """bf16, fp16 or None (full precision)."""
    if config.amp == "off" or (config.amp == "auto" and device.type != "cuda"):
        return None
    if config.amp == "fp16" or (config.amp == "auto" and not torch.cuda.is_bf16_supported()):
        return torch.float16
    return torch.bfloat16


def make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """SGD (Nesterov momentum) or AdamW; no weight decay on 1-d parameters (norms, biases)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim <= 1]
    groups = [{"params": decay, "weight_decay": config.decay}, {"params": no_decay, "weight_decay": 0.0}]
    if config.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=config.peak_lr, momentum=config.momentum, nesterov=True)
    return torch.optim.AdamW(groups, lr=config.peak_lr, betas=(0.9, 0.95))
