"""The ``device=`` of a loader config, checked when the config is built.

Without this, ``device="cuda"`` on a machine without CUDA failed on the first
batch with torch's own traceback (``Torch not compiled with CUDA enabled``),
and a misspelt device with torch's parser error; both name no parameter.
"""

from __future__ import annotations

import torch

from dataio.formats.errors import ConfigError

KNOWN = "cpu, cuda, cuda:N or mps"


def parsed_device(device: str | torch.device, name: str = "device") -> torch.device:
    """``device`` parsed, or a ``ConfigError`` naming ``name`` when it is not a device dataio runs on."""
    if not isinstance(device, (str, torch.device)):
        raise ConfigError(f"{{0}} must be a device name ({KNOWN}), got {type(device).__name__}", name)
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        raise ConfigError(f"{{0}}={str(device)!r} is not a device: use {KNOWN}", name) from None
    if parsed.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"{{0}}={str(device)!r} is not supported: use {KNOWN}", name)
    return parsed


def checked_device(device: str | torch.device, name: str = "device") -> str:
    """``device`` as a string, or a ``ConfigError`` naming ``name`` when it is unknown or absent here."""
    parsed = parsed_device(device, name)
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"{{0}}={str(device)!r}: CUDA is not available on this machine "
                              "(torch.cuda.is_available() is False); use device='cpu'", name)
        count = torch.cuda.device_count()
        if parsed.index is not None and parsed.index >= count:
            raise ConfigError(f"{{0}}={str(device)!r}: this machine has {count} CUDA device(s), "
                              f"cuda:0 to cuda:{count - 1}", name)
    elif parsed.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"{{0}}={str(device)!r}: MPS is not available on this machine; use device='cpu'", name)
    return str(device)
